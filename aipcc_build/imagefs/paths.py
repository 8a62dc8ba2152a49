"""Where a member lands, as containers/storage decides it (pkg/archive): Go's
`filepath.Clean` of the name, joined under the layer's root; a name that still climbs
above the root after cleaning makes the engine refuse the whole layer. Whiteouts are the
OCI image spec's: `.wh.NAME` removes NAME from lower layers, `.wh..wh..opq` hides all
lower content of its directory; other `.wh..wh.` names are aufs metadata."""

from __future__ import annotations

from typing import Optional

WHITEOUT_PREFIX = ".wh."
OPAQUE = ".wh..wh..opq"
AUFS_META_PREFIX = ".wh..wh."


class Breakout(Exception):
    """A member name that climbs out of the layer's root: the engine refuses the layer."""


def clean(name: str) -> str:
    """The absolute path NAME lands at ("/" for the root). `..` is resolved lexically, as
    Go's filepath.Clean does; raises Breakout when a relative NAME climbs above the root
    (an absolute one cannot: "/.." is "/")."""
    absolute = name.startswith("/")
    parts: list[str] = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not absolute:
                parts.append("..")
            continue
        parts.append(part)
    if parts and parts[0] == "..":
        raise Breakout(f"{name!r} climbs out of the layer")
    return "/" + "/".join(parts)


def parent_and_base(path: str) -> tuple[str, str]:
    """("/a", "b") for "/a/b"; ("/", "a") for "/a"."""
    parent, _, base = path.rpartition("/")
    return parent or "/", base


def whiteout_of(path: str) -> Optional[tuple[str, str]]:
    """For a whiteout member at PATH: ("opaque", its directory) or ("remove", the path it
    removes); ("meta", PATH) for aufs metadata; None for an ordinary member."""
    parent, base = parent_and_base(path)
    if not base.startswith(WHITEOUT_PREFIX):
        return None
    if base == OPAQUE:
        return "opaque", parent
    if base.startswith(AUFS_META_PREFIX):
        return "meta", path
    return "remove", (parent.rstrip("/") + "/" + base[len(WHITEOUT_PREFIX):])
