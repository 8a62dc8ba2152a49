"""Where a member lands, as containers/storage decides it (pkg/archive): Go's
`filepath.Clean` of the name, joined under the layer's root it is chrooted in (so `..`
stops at the root); a name held twice refuses the layer. Whiteouts are the OCI image
spec's: `.wh.NAME` removes NAME from lower layers, `.wh..wh..opq` hides all
lower content of its directory; other `.wh..wh.` names are aufs metadata."""

from __future__ import annotations

from typing import Optional

from .symlinks import PATH_MAX

WHITEOUT_PREFIX = ".wh."
OPAQUE = ".wh..wh..opq"
AUFS_META_PREFIX = ".wh..wh."


# Linux's limit on a name (PATH_MAX, on a path, is symlinks'): the engine cannot create a
# member past them.
NAME_MAX = 255


def engine_name_problem(path: str, link: bytes) -> str:
    """Why the engine cannot create a member at PATH (linking to LINK), or ""."""
    if len(path.encode("utf-8", "surrogateescape")) >= PATH_MAX:
        return f"a path of {len(path)} characters, Linux takes fewer than {PATH_MAX} bytes"
    if len(link) >= PATH_MAX:
        return f"a link target of {len(link)} bytes, Linux takes fewer than {PATH_MAX}"
    longest = max(len(part.encode("utf-8", "surrogateescape")) for part in path.split("/"))
    if longest > NAME_MAX:
        return f"a name of {longest} bytes, Linux takes at most {NAME_MAX}"
    return ""


def clean(name: str) -> str:
    """The absolute path NAME lands at ("/" for the root). The engine unpacks chrooted in
    the layer's directory, so `..` is resolved lexically and stops at the root, for
    relative and absolute names alike ("a/../../etc" lands at "/etc")."""
    parts: list[str] = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def climbs(name: str) -> bool:
    """Whether a relative NAME climbs above the root before `clean` stops it there."""
    depth = 0
    for part in name.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0 and not name.startswith("/"):
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def duplicate_key(name: str) -> str:
    """The key containers/storage refuses a layer for holding twice: Go's filepath.Clean
    of the name, which keeps a leading "/" and leading ".." ("./f", "a/../f" and "f/" are
    one name; "/f" is another)."""
    absolute = name.startswith("/")
    parts: list[str] = []
    for part in name.split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts and parts[-1] != "..":
            parts.pop()
        elif part != ".." or not absolute:
            parts.append(part)
    joined = "/".join(parts)
    return "/" + joined if absolute else joined or "."


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
