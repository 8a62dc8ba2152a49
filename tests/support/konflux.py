"""Konflux's side of a build nudge, for tests: what build-service has Renovate do."""

from __future__ import annotations

import re
from pathlib import Path


def renovate_nudge(root: Path, file_match: str, repository: str, digest: str) -> list[str]:
    """What build-service's nudge does to the repository after REPOSITORY's build: in the
    files FILE_MATCH (the nudge-files annotation, Renovate fileMatch regexes) rewrite the
    digest of every `<repository>(:.*)?@sha256:...` (build-service's matchStrings)."""
    patterns = [re.compile(p.strip()) for p in file_match.split(",")]
    match = re.compile(re.escape(repository) + r"(:.*)?@(?P<currentDigest>sha256:[a-f0-9]+)")
    changed = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts):
        relative = path.relative_to(root).as_posix()
        if not any(p.search(relative) for p in patterns):
            continue
        text = path.read_text()
        new = match.sub(lambda m: m[0].replace(m["currentDigest"], digest), text)
        if new != text:
            path.write_text(new)
            changed.append(relative)
    return changed
