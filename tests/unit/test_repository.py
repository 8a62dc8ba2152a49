"""What the repository tracks: every CI job and every `git clone` of it copies it all."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The largest tracked file is a docs picture of about 120 kB; wheels and base-OS tarballs
# are fetched and cached by scripts/, never committed.
LIMIT = 512 * 1024


def test_no_large_file_is_tracked() -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True,
                            capture_output=True, timeout=60).stdout.decode()
    large = [name for name in listed.split("\0")
             if name and (REPO / name).is_file() and (REPO / name).stat().st_size > LIMIT]
    assert large == []
