"""An image's final filesystem, exactly as the container engine builds it from its layers.

The model is containers/storage's overlay driver, the default of podman and buildah: each
layer is unpacked on its own into a directory (pkg/archive `Unpack`, run chrooted in it),
then overlayfs stacks the directories. Per member, in tar order:

- the name is Go's (`tar`), cleaned (`paths.clean`: `..` stops at the root); a name the
  layer holds twice refuses it (`paths.duplicate_key`);
- missing parent directories are made (mode 0755), following this layer's own symlinks
  inside its root; a parent that is a file, or a symlink to nothing, refuses the layer;
- what stands at the path is removed, unless both are directories (then they merge);
- `.wh.NAME` becomes a whiteout of NAME (refused when NAME already exists in this layer),
  `.wh..wh..opq` marks its directory opaque; a global header removes what its name names
  and creates nothing;
- a hard link shares the inode of a member already unpacked in this layer (refused when
  there is none, or it is a directory); the member's mode is then set on that inode.

overlayfs then shows, from the top layer down, the first entry of each path; a whiteout
hides lower entries, an opaque directory all lower entries below it, a directory above a
non-directory hides it. (The vfs driver instead unpacks each layer onto a copy of the one
below, following lower symlinks: images that rely on the difference are not modelled.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from .blobs import LayerJob
from .lookup import LayerView
from .paths import clean, duplicate_key, engine_name_problem, parent_and_base
from .stream import LayerStream, read_layer
from .symlinks import MAX_HOPS
from .tar import (
    BLOCKDEV,
    CHARDEV,
    DIRECTORY,
    FIFO,
    GLOBAL,
    HARDLINK,
    REGULAR,
    SYMLINK,
    TarWalker,
)

WHITEOUT = "whiteout"
IMPLIED_DIRECTORY_MODE = 0o755


class LayerRefused(Exception):
    """The engine would refuse to unpack this layer; the message says why."""


# The member types containers/storage creates; it refuses a layer holding any other.
ENGINE_KINDS = frozenset((REGULAR, HARDLINK, SYMLINK, CHARDEV, BLOCKDEV, DIRECTORY, FIFO,
                          GLOBAL))


def place(name: str, kind: str, link: bytes, seen: set[int]) -> str:
    """Where the engine puts member NAME of type KIND (linking to LINK), SEEN holding the
    hashed duplicate keys of the layer's members so far (this one is added). Raises
    LayerRefused for a name held twice, one Linux cannot create, a type the engine does
    not create."""
    key = hash(duplicate_key(name).encode("utf-8", "surrogateescape"))
    if key in seen:
        raise LayerRefused(f"member {name!r} is the layer's second of that name")
    seen.add(key)
    path = clean(name)
    too_long = engine_name_problem(path, link)
    if too_long:
        raise LayerRefused(f"member {name[:200]!r}...: {too_long}")
    if kind not in ENGINE_KINDS:
        raise LayerRefused(f"member {name!r} has tar type {kind!r}, which the engine does "
                           "not create")
    return path


class NotADirectory(LayerRefused):
    """A member's parent is not a directory (ENOTDIR): the engine refuses the layer,
    except for a whiteout, which it then leaves out."""


class Node:
    """An inode: hard links share one, so a chmod through either shows in both."""

    __slots__ = ("kind", "mode", "digest", "link", "opaque", "first")

    def __init__(self, kind: str, mode: int, digest: Optional[str] = None,
                 link: str = "", first: str = "") -> None:
        self.kind = kind
        self.mode = mode
        self.digest = digest  # sha256 of a regular file's content
        self.link = link  # a symlink's target, as written
        self.opaque = False
        self.first = first  # the path a regular file was written at (hard links share it)


@dataclass(frozen=True)
class Entry:
    """One path of the final filesystem."""

    kind: str  # a tar type flag: REGULAR, DIRECTORY, SYMLINK, FIFO, CHARDEV, BLOCKDEV
    mode: int
    digest: Optional[str] = None
    link: str = ""


class _Hasher:
    def __init__(self) -> None:
        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        return len(data)


class Tree(dict[str, Node]):
    """Paths to inodes, each directory's children indexed: removing a directory costs
    what it holds, not the whole tree (a hostile layer cannot make unpacking quadratic)."""

    def __init__(self) -> None:
        super().__init__()
        self._children: dict[str, set[str]] = {}

    def __setitem__(self, path: str, node: Node) -> None:
        if path != "/":
            self._children.setdefault(parent_and_base(path)[0], set()).add(path)
        super().__setitem__(path, node)

    def remove_below(self, path: str) -> None:
        """Everything below PATH."""
        pending = list(self._children.pop(path, ()))
        while pending:
            current = pending.pop()
            super().pop(current, None)
            pending.extend(self._children.pop(current, ()))

    def remove(self, path: str) -> None:
        """PATH and everything below it."""
        self.remove_below(path)
        super().pop(path, None)
        if path != "/":
            self._children.get(parent_and_base(path)[0], set()).discard(path)

    def clear(self) -> None:
        super().clear()
        self._children.clear()


def _resolve_parent(tree: Tree, parent: str, create: bool = True
                    ) -> Optional[str]:
    """Where PARENT is inside this layer's root, following its symlinks, making missing
    directories as MkdirAll does (with CREATE; else None when one is missing)."""
    pending = [p for p in parent.split("/") if p][::-1]
    resolved = ""
    hops = 0
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":
            resolved = resolved.rpartition("/")[0]
            continue
        candidate = f"{resolved}/{part}"
        node = tree.get(candidate)
        if node is None:
            if not create:
                return None
            node = tree[candidate] = Node(DIRECTORY, IMPLIED_DIRECTORY_MODE)
        elif node.kind == SYMLINK:
            hops += 1
            if hops > MAX_HOPS:
                raise LayerRefused(f"too many symlinks on the way to {parent}")
            target = [p for p in node.link.split("/") if p]
            if node.link.startswith("/"):
                resolved = ""
            pending.extend(reversed(target))
            if tree.get(clean(f"{resolved}/{node.link}")) is None:
                raise LayerRefused(f"{candidate} on the way to {parent} is a symlink to "
                                   "nothing")
            continue
        elif node.kind != DIRECTORY:
            raise NotADirectory(f"{candidate} on the way to {parent} is not a directory")
        resolved = candidate
    return resolved or "/"


def _exists(tree: Tree, path: str, hops: int = 0) -> bool:
    """Whether PATH can be opened in the layer now, following its symlinks."""
    parent, base = parent_and_base(path)
    try:
        directory = _resolve_parent(tree, parent, create=False)
    except LayerRefused:
        return False
    node = None if directory is None else tree.get(directory.rstrip("/") + "/" + base)
    if node is None or node.kind == WHITEOUT:
        return False
    if node.kind == SYMLINK:
        return hops < MAX_HOPS and _exists(tree, clean(f"{directory}/{node.link}"), hops + 1)
    return True


def unpack(stream: LayerStream, tree: Tree, view: Optional[LayerView] = None,
           limit: int = 0) -> None:
    """Unpack one layer's STREAM into TREE (which holds "/"). With VIEW, content is not
    hashed; the bytes of the regular file at VIEW.wanted are kept in it when at most
    LIMIT."""
    walker = TarWalker(stream)
    seen: set[int] = set()
    directories: list[str] = []  # the directory members, whose times are set at the end
    for entry in walker:
        name = entry.name.decode("utf-8", "surrogateescape")
        path = place(name, entry.kind, entry.link, seen)
        if path == "/":
            if entry.kind not in (DIRECTORY, GLOBAL):
                raise LayerRefused(f"member {name!r} would replace the root")
            continue
        parent, base = parent_and_base(path)
        whiteout = entry.kind != GLOBAL and base.startswith(".wh.")
        try:
            directory = _resolve_parent(tree, parent) or "/"
        except NotADirectory:
            if not whiteout:
                raise
            if base == ".wh..wh..opq":
                # setxattr on the directory: on a file it succeeds (and hides nothing),
                # through a file it fails, and the layer with it.
                _resolve_parent(tree, parent_and_base(parent)[0])
            continue  # mknod of a whiteout below a file: ENOTDIR, which is ignored
        where = directory.rstrip("/") + "/" + base
        if whiteout:
            if base == ".wh..wh..opq":
                tree[directory].opaque = True
                continue
            hidden = directory.rstrip("/") + "/" + base[4:]
            if hidden in tree:
                raise LayerRefused(f"whiteout {path} of {hidden}, which the layer holds")
            tree[hidden] = Node(WHITEOUT, 0)
            continue
        existing = tree.get(where)
        if existing is not None and not (existing.kind == DIRECTORY
                                         and entry.kind == DIRECTORY):
            tree.remove(where)
        mode = entry.mode & 0o7777
        if entry.kind == GLOBAL:
            continue
        if entry.kind == DIRECTORY:
            directories.append(path)
            if existing is not None and existing.kind == DIRECTORY:
                existing.mode = mode
            else:
                tree[where] = Node(DIRECTORY, mode)
        elif entry.kind == REGULAR:
            digest = None
            if view is None:
                sink = _Hasher()
                walker.copy_data(sink)  # type: ignore[arg-type]
                digest = sink.hash.hexdigest()
            elif where == view.wanted:
                view.size = entry.size
                view.content = walker.read_data() if entry.size <= limit else None
            tree[where] = Node(REGULAR, mode, digest, first=where)
        elif entry.kind == SYMLINK:
            tree[where] = Node(SYMLINK, 0o777, link=entry.link.decode("utf-8",
                                                                       "surrogateescape"))
        elif entry.kind == HARDLINK:
            link = entry.link.decode("utf-8", "surrogateescape")
            target_path = clean(link)
            lparent, lbase = parent_and_base(target_path)
            found = _resolve_parent(tree, lparent, create=False)
            target = None if found is None else tree.get(found.rstrip("/") + "/" + lbase)
            if target is None or target.kind in (DIRECTORY, WHITEOUT):
                raise LayerRefused(f"hard link {path} to {link!r}, which the layer does "
                                   "not hold as a file before it")
            if target.kind != SYMLINK:
                target.mode = mode
            tree[where] = target
        else:  # FIFO, CHARDEV, BLOCKDEV: `place` refused the rest
            tree[where] = Node(entry.kind, mode)
    for path in directories:
        if not _exists(tree, path):
            raise LayerRefused(f"directory {path} is gone when the engine sets its times: "
                               "a later member replaced a directory above it")


def layer_tree(job: LayerJob) -> Tree:
    """What the engine unpacks from one layer into its own directory. Raises
    LayerRefused or TarError."""
    tree = Tree()
    tree["/"] = Node(DIRECTORY, IMPLIED_DIRECTORY_MODE)
    read_layer(job, lambda stream: unpack(stream, tree))
    return tree


def stack(uppers: Iterable[Tree]) -> dict[str, Entry]:
    """The overlayfs view of layer trees (bottom first)."""
    merged = Tree()
    for upper in uppers:
        for path in sorted(upper, key=lambda p: p.count("/")):
            node = upper[path]
            below = merged.get(path)
            if path == "/":
                if node.opaque:
                    merged.clear()
                merged["/"] = node
            elif node.kind == WHITEOUT:
                merged.remove(path)
            elif node.kind == DIRECTORY and below is not None and below.kind == DIRECTORY:
                if node.opaque:
                    merged.remove_below(path)
                merged[path] = node
            else:
                merged.remove(path)
                merged[path] = node
    return {path: Entry(n.kind, n.mode if n.kind != SYMLINK else 0o777, n.digest, n.link)
            for path, n in merged.items() if path != "/"}


def final_tree(layers: Iterable[LayerJob]) -> dict[str, Entry]:
    """The final filesystem of an image of LAYERS (bottom first). Raises LayerRefused
    naming the layer the engine refuses, TarError for one it cannot read."""
    trees = []
    for job in layers:
        try:
            trees.append(layer_tree(job))
        except LayerRefused as exc:
            raise LayerRefused(f"layer {job.digest}: {exc}") from exc
    return stack(trees)
