"""Read one file of an image's final filesystem, the way a process in the container opens it.

The layer scans read pip's and uv's config files by name, before the image's environment
is known; a file that `PIP_CONFIG_FILE` or `UV_CONFIG_FILE` names under another name is
read here, on demand, and not cached, by the one model of the final tree (`overlay`):
layers are unpacked from the top down, only as far as its `Stack` asks, each once, plus
once more to read a file a symlink or hard link led to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from .blobs import LayerJob
from .overlay import (
    IMPLIED_DIRECTORY_MODE,
    LayerIndex,
    LayerRefused,
    Node,
    Stack,
    Tree,
    Wanted,
    index_of,
    unpack,
)
from .tar import DIRECTORY, HARDLINK, REGULAR, TarError


@dataclass(frozen=True)
class FileRead:
    """One file of an image's final filesystem, read on demand (not cached): a config file
    `PIP_CONFIG_FILE` or `UV_CONFIG_FILE` names under a name the layer scans do not read."""

    path: str  # where its symlinks lead
    layer: Optional[str] = None  # the digest of the layer holding it; None when absent
    text: Optional[str] = None
    data: Optional[bytes] = None  # the bytes `text` decodes (an RPM database has no text)
    problem: Optional[str] = None  # why there is no text: absent, not a file, too large
    error: Optional[str] = None  # a layer could not be read
    over_limit: bool = False  # a regular file larger than the reader's limit: not read

    @property
    def absent(self) -> bool:
        """Whether the image holds nothing a process could open at the path (a missing
        file, a dangling link or loop; not a directory or a device, which it holds)."""
        return self.layer is None and self.error is None


def view_layer(job: LayerJob, wanted: str, limit: int) -> tuple[LayerIndex, Wanted]:
    """Unpack one layer as the engine does, for a lookup of paths (a second read, after
    the scans): its index, and the bytes of the regular file WANTED when it holds it
    (within LIMIT). Raises TarError when the layer cannot be read, does not match its
    digest, the engine would refuse it, or local storage refuses WANTED's content."""
    # The inflaters and the unpacking: not for validations that never look.
    from .stream import read_layer

    kept = Wanted(wanted, limit)
    tree = Tree()
    tree["/"] = Node(DIRECTORY, IMPLIED_DIRECTORY_MODE)
    try:
        read = read_layer(job, lambda stream: unpack(stream, tree, kept))
    except LayerRefused as exc:
        raise TarError(f"layer {job.digest} is refused by the container engine: {exc}") \
            from exc
    refused = dict(read.refused)
    if wanted in refused:
        raise TarError(f"layer {job.digest}: {wanted} not read: {refused[wanted]}")
    return index_of(tree), kept


def read_path(layers: Sequence[LayerJob], path: str, limit: int) -> FileRead:
    """The file at PATH (absolute, normalized) in the image of LAYERS (bottom first); its
    content when at most LIMIT bytes. Layers are unpacked from the top down as the
    `overlay.Stack` asks for them, each once."""
    kept: dict[int, Wanted] = {}
    wanted = [path]  # the path a symlink led to last: the file most likely read

    def load(number: int) -> LayerIndex:
        index, kept[number] = view_layer(layers[number], wanted[0], limit)
        return index

    model = Stack(len(layers), load)
    try:
        found = model.resolve(path, lambda target: wanted.__setitem__(0, target))
        if found.problem or found.layer is None:
            return FileRead(found.path, problem=found.problem or "no such file")
        if found.kind == DIRECTORY:
            return FileRead(found.path, layers[found.layer].digest, problem="a directory")
        if found.kind not in (REGULAR, HARDLINK):
            return FileRead(found.path, layers[found.layer].digest,
                            problem="not a regular file")
        content = kept[found.layer]
        if content.path != found.member:
            _, content = view_layer(layers[found.layer], found.member, limit)
    except TarError as exc:
        return FileRead(path, error=str(exc))
    digest = layers[found.layer].digest
    if content.content is None:
        return FileRead(found.path, digest, problem=f"{content.size} bytes, more than "
                                                    f"{limit}: not read", over_limit=True)
    return FileRead(found.path, digest, content.content.decode("utf-8", "replace"),
                    content.content)
