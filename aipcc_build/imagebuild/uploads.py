"""Concurrent pushes of images that share a layer compress and upload that layer once.

`buildah push` compresses every layer the registry does not have yet, and it cannot know
that another push on this host is compressing the same one: three images on one OS layer
pushed together (three jobs of a CI pipeline, or one `matrix` run) gzip it three times.
So a push first takes, for each of its layers not yet pushed to that registry from this
host, an exclusive `flock` named by the layer; the push holding it uploads the layer, and
one that waited finds it in the registry (buildah's blob cache then mounts it from the
repository that has it, without compressing it again).

Markers record the layers pushed to each registry; a layer with a marker takes no lock,
so pushes of images whose layers are all up run side by side. A marker is only a hint: a
registry that lost the layer gets it from buildah again, merely without the lock. Locks
and markers live under buildah's run root (tmpfs, one per store), shared by every run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Callable, Optional

from ..tools import buildah

POLL_SECONDS = 0.1
MARKER_SUFFIX = ".pushed"


def uploads_dir(store: buildah.Storage, registry: str) -> Path:
    """Where the locks and markers of the layers pushed to REGISTRY (a host[:port]) live."""
    name = hashlib.sha256(registry.encode()).hexdigest()[:16]
    return store.run_root / "aipcc-build-uploads" / name


@contextlib.contextmanager
def first_upload(directory: Path, layers: Iterable[str], give_up: Callable[[], bool]
                 ) -> Iterator[Callable[[], None]]:
    """Hold the locks of LAYERS (diff IDs) that have no marker in DIRECTORY for the block;
    the block calls what it is given once its push succeeded, which marks every layer.

    Waits for a layer another push holds, polling, until it is marked or unlocked, or until
    GIVE_UP() says to stop waiting (a stopped run, a deadline): the block then runs without
    that lock, as pushes did before this module.
    """
    directory.mkdir(parents=True, exist_ok=True)
    wanted = sorted(set(layers))
    held: list[IO[str]] = []
    try:
        for layer in wanted:  # in one order everywhere: two pushes never wait on each other
            handle = _lock_unmarked(directory, layer, give_up)
            if handle is not None:
                held.append(handle)

        def mark() -> None:
            for layer in wanted:
                _marker(directory, layer).touch()

        yield mark
    finally:
        for handle in held:
            handle.close()  # releases the flock


def _lock_unmarked(directory: Path, layer: str, give_up: Callable[[], bool]
                   ) -> Optional[IO[str]]:
    """The locked lock file of LAYER, or None when the layer is marked or we stop waiting."""
    if _marker(directory, layer).exists():
        return None
    handle = (directory / f"{_safe(layer)}.lock").open("a")
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if give_up():
                handle.close()
                return None
            time.sleep(POLL_SECONDS)
            continue
        if _marker(directory, layer).exists():  # pushed by the one we waited for
            handle.close()
            return None
        return handle


def _marker(directory: Path, layer: str) -> Path:
    return directory / f"{_safe(layer)}{MARKER_SUFFIX}"


def _safe(layer: str) -> str:
    return layer.replace(":", "-").replace("/", "-")
