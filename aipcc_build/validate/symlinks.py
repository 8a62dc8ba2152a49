"""Resolve symlinks lexically inside an image's own tree, never on the host."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

MAX_HOPS = 40  # Linux's own limit for following symlinks in one path lookup
# Only these symlinks can name a toolkit (/usr/local/cuda -> /etc/alternatives/cuda ->
# /usr/local/cuda-12.9); the cache keeps just them, the rest are checked for loops per layer.
TOOLKIT_PREFIXES = ("/usr/local/", "/opt/", "/etc/alternatives/")


def resolve_link(path: str, links: Mapping[str, str]) -> Optional[str]:
    """The path PATH leads to inside the image; None for a loop (too many hops).

    `..` at the root stays at the root, as in a container's mount namespace.
    """
    resolved: list[str] = []
    pending = [p for p in path.split("/") if p]
    pending.reverse()
    hops = 0
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = "/" + "/".join(resolved + [part])
        target = links.get(candidate)
        if target is None:
            resolved.append(part)
            continue
        hops += 1
        if hops > MAX_HOPS:
            return None
        if target.startswith("/"):
            resolved = []
        pending.extend(reversed([p for p in target.split("/") if p]))
    return "/" + "/".join(resolved)
