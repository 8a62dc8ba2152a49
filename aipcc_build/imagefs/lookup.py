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
from dataclasses import dataclass, field
from typing import Optional

from .blobs import LayerJob
from .symlinks import MAX_HOPS, resolve_link
from .tar import DIRECTORY, HARDLINK, REGULAR, SYMLINK, TarError


@dataclass(frozen=True)
class FileRead:
    """One file of an image's final filesystem, read on demand (not cached): a config file
    `PIP_CONFIG_FILE` or `UV_CONFIG_FILE` names under a name the layer scans do not read."""

    path: str  # where its symlinks lead
    layer: Optional[str] = None  # the digest of the layer holding it; None when absent
    text: Optional[str] = None
    problem: Optional[str] = None  # why there is no text: absent, not a file, too large
    error: Optional[str] = None  # a layer could not be read

    @property
    def absent(self) -> bool:
        """Whether a process in the container could not open the file at all."""
        return self.layer is None and self.error is None


@dataclass
class LayerView:
    """What one layer says about any path: each member's kind (the last member of a name
    counts; the directories the engine creates for a member's parents count too), the
    targets of its symlinks and hard links, its whiteouts and opaque directories; and the
    bytes of the one regular file WANTED, if it holds it (`size` bytes, read when within
    the reader's limit)."""

    wanted: str
    kinds: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    whiteouts: list[str] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    size: int = 0
    content: Optional[bytes] = None


def view_layer(job: LayerJob, wanted: str, limit: int) -> LayerView:
    """Unpack one layer as the engine does, for a lookup of paths (a second read, after
    the scans). Raises TarError when the layer cannot be read, does not match its digest,
    the engine would refuse it, or local storage refuses WANTED's content."""
    # The inflaters and the unpacking model: not for validations that never look.
    from .stream import read_layer
    from .tree import WHITEOUT, LayerRefused, Node, Tree, unpack

    view = LayerView(wanted)
    tree = Tree()
    tree["/"] = Node(DIRECTORY, 0o755)
    try:
        read = read_layer(job, lambda stream: unpack(stream, tree, view, limit))
    except LayerRefused as exc:
        raise TarError(f"layer {job.digest} is refused by the container engine: {exc}") \
            from exc
    refused = dict(read.refused)
    if wanted in refused:
        raise TarError(f"layer {job.digest}: {wanted} not read: {refused[wanted]}")
    for path, node in tree.items():
        if node.opaque:
            view.opaque.append(path)
        if node.kind == WHITEOUT:
            view.whiteouts.append(path)
        elif path != "/":
            hard = node.kind == REGULAR and node.first != path
            view.kinds[path] = HARDLINK if hard else node.kind
            if hard or node.kind == SYMLINK:
                view.links[path] = node.first if hard else node.link
    return view


# What a layer says about a path.
_LINK, _FILE, _ABSENT = "link", "file", "absent"


def _decide(view: LayerView, path: str, number: int, upper_dirs: set[str]
            ) -> Optional[tuple[str, Optional[str]]]:
    """What layer NUMBER says about PATH, looking down from the layers above it: (_LINK,
    where a symlink leads or None if nowhere), (_FILE, the member holding the bytes),
    (_ABSENT, why); None when it says nothing and a lower layer decides. UPPER_DIRS: the
    directories on PATH that layers above hold as directories (this one's are added)."""
    parts = path.split("/")
    directories = ["/".join(parts[:i]) for i in range(2, len(parts))]
    for directory in directories:
        if directory in upper_dirs and view.kinds.get(directory, DIRECTORY) != DIRECTORY:
            # overlayfs: a directory above hides a lower non-directory and all below it.
            return _ABSENT, "no such file"
    # The layer's own members count before its whiteouts, which remove lower content only.
    for directory in directories:
        kind = view.kinds.get(directory)
        if kind == DIRECTORY:
            upper_dirs.add(directory)
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


def read_path(layers: Sequence[LayerJob], path: str, limit: int) -> FileRead:
    """The file at PATH (absolute, normalized) in the image of LAYERS (bottom first); its
    content when at most LIMIT bytes."""
    views: dict[int, LayerView] = {}
    current = path
    try:
        for _ in range(MAX_HOPS + 1):
            decided: Optional[tuple[str, Optional[str]]] = None
            upper_dirs: set[str] = set()
            for number in reversed(range(len(layers))):
                if number not in views:
                    views[number] = view_layer(layers[number], current, limit)
                decided = _decide(views[number], current, number, upper_dirs)
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
