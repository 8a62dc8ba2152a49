"""An image's final filesystem, exactly as the container engine builds it from its layers:
the `overlay` model unpacked and stacked, every path at once (for the engine-differential
tests and the lookup's answers; the judge asks the same `Stack` one path at a time)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from .blobs import LayerJob
from .overlay import (
    IMPLIED_DIRECTORY_MODE,
    LayerRefused,
    Node,
    Stack,
    Tree,
    index_of,
    unpack,
)
from .stream import read_layer
from .tar import DIRECTORY, HARDLINK, REGULAR, SYMLINK

__all__ = ["Entry", "LayerRefused", "final_tree", "layer_tree", "stack"]


@dataclass(frozen=True)
class Entry:
    """One path of the final filesystem."""

    kind: str  # a tar type flag: REGULAR, DIRECTORY, SYMLINK, FIFO, CHARDEV, BLOCKDEV
    mode: int
    digest: Optional[str] = None
    link: str = ""


def layer_tree(job: LayerJob) -> Tree:
    """What the engine unpacks from one layer into its own directory. Raises
    LayerRefused or TarError."""
    tree = Tree()
    tree["/"] = Node(DIRECTORY, IMPLIED_DIRECTORY_MODE)
    read_layer(job, lambda stream: unpack(stream, tree))
    return tree


def stack(uppers: Iterable[Tree]) -> dict[str, Entry]:
    """The overlayfs view of layer trees (bottom first), from the `overlay.Stack` of their
    indexes."""
    trees = list(uppers)
    model = Stack.of([index_of(tree) for tree in trees])
    entries = {}
    for path, (number, kind) in model.paths().items():
        node = trees[number][path]
        shown = REGULAR if kind == HARDLINK else kind
        entries[path] = Entry(shown, node.mode if shown != SYMLINK else 0o777, node.digest,
                              node.link)
    return entries


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
