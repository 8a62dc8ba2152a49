"""Read one file of an image's final filesystem, the way a process in the container opens it.

The layer scans read pip's and uv's config files by name, before the image's environment
is known; a file that `PIP_CONFIG_FILE` or `UV_CONFIG_FILE` names under another name is
read here, on demand, and not cached. Layers are walked from the top down, only as far as
needed: the topmost layer that holds the path decides, and a whiteout or an opaque
directory above it hides it. A symlink on the way (at the path or at a directory above
it) is followed as Linux does, at most MAX_HOPS times: the lookup starts again from the
top with the path it leads to. Every member of a walked layer is remembered, so each
layer is walked once, plus once more to read a file a symlink or hard link led to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from .blobs import LayerJob
from .detect import SMALL_FILE_LIMIT
from .layers import DIRECTORY, HARDLINK, REGULAR, SYMLINK, LayerView, TarError, view_layer
from .results import FileRead
from .symlinks import MAX_HOPS, resolve_link

# What a layer says about a path.
_LINK, _FILE, _ABSENT = "link", "file", "absent"


def _decide(view: LayerView, path: str, number: int
            ) -> Optional[tuple[str, Optional[str]]]:
    """What layer NUMBER says about PATH, looking down from the layers above it: (_LINK,
    where a symlink leads or None if nowhere), (_FILE, the member holding the bytes),
    (_ABSENT, why); None when it says nothing and a lower layer decides."""
    parts = path.split("/")
    directories = ["/".join(parts[:i]) for i in range(2, len(parts))]
    # The layer's own members count before its whiteouts, which remove lower content only.
    for directory in directories:
        kind = view.kinds.get(directory)
        if kind == SYMLINK:
            return _LINK, resolve_link(path, {directory: view.links[directory]})
        if kind is not None and kind != DIRECTORY:
            return _ABSENT, f"{directory} is not a directory"
    kind = view.kinds.get(path)
    if kind == SYMLINK:
        return _LINK, resolve_link(path, {path: view.links[path]})
    if kind in (REGULAR, HARDLINK):
        return _FILE, view.links[path] if kind == HARDLINK else path
    if kind is not None:
        return _ABSENT, "a directory" if kind == DIRECTORY else "not a regular file"
    removed = next((p for p in (*directories, path) if p in view.whiteouts), None)
    if removed is not None:
        return _ABSENT, f"{removed} is removed by layer {number + 1}"
    hidden = next((d for d in view.opaque if d == "/" or d in directories), None)
    if hidden is not None:
        return _ABSENT, f"layer {number + 1} makes {hidden} opaque"
    return None


def read_path(layers: Sequence[LayerJob], path: str, limit: int = SMALL_FILE_LIMIT
              ) -> FileRead:
    """The file at PATH (absolute, normalized) in the image of LAYERS (bottom first)."""
    views: dict[int, LayerView] = {}
    current = path
    try:
        for _ in range(MAX_HOPS + 1):
            decided: Optional[tuple[str, Optional[str]]] = None
            for number in reversed(range(len(layers))):
                if number not in views:
                    views[number] = view_layer(layers[number], current, limit)
                decided = _decide(views[number], current, number)
                if decided is not None:
                    break
            if decided is None:
                return FileRead(current, problem="no such file")
            what, where = decided
            if what == _ABSENT:
                return FileRead(current, problem=where)
            if what == _FILE:
                return _content(layers, views, number, current, where or "", limit)
            if where is None:
                break  # a loop resolve_link caught
            current = where
    except TarError as exc:
        return FileRead(current, error=str(exc))
    return FileRead(current, problem=f"its symlinks never resolve (a loop, more than "
                                     f"{MAX_HOPS} hops, or a path longer than PATH_MAX)")


def _content(layers: Sequence[LayerJob], views: dict[int, LayerView], number: int,
             path: str, member: str, limit: int) -> FileRead:
    """The bytes of MEMBER of layer NUMBER: PATH itself, or the file a hard link at PATH
    shares them with."""
    view = views[number]
    if view.wanted != member:
        view = views[number] = view_layer(layers[number], member, limit)
    if view.kinds.get(member) != REGULAR:
        return FileRead(path, problem=f"a hard link to {member or '?'}, which its layer "
                                      "does not hold as a file")
    digest = layers[number].digest
    if view.content is None:
        return FileRead(path, digest, problem=f"{view.size} bytes, more than {limit}: "
                                              "not read")
    return FileRead(path, digest, view.content.decode("utf-8", "replace"))
