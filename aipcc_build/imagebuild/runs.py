"""Which working containers belong to which run of `matrix`, and whether that run lives.

Every `buildah build` of a run gets `--build-arg AIPCC_BUILD_RUN=<run id>`; buildah keeps a
build's arguments with each working container it makes (every stage, every step), so a
container says which run made it. No Containerfile declares the argument: it changes
neither the image nor the layer cache.

A run holds an exclusive `flock` on `<run id>.lock` in a directory under buildah's run
root (tmpfs, one per store) for as long as it lives. A run is dead when its lock file is
gone (the host rebooted) or nobody holds it (the run was killed with SIGKILL): its
containers are removed by the next run, or by `aipcc-build clean`. A live run's never are.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Optional

from ..tools import buildah
from ..tools.runner import Runner

RUN_ARG = "AIPCC_BUILD_RUN"
LOCK_SUFFIX = ".lock"


def locks_dir(store: buildah.Storage) -> Path:
    return store.run_root / "aipcc-build-runs"


@contextlib.contextmanager
def hold(store: buildah.Storage) -> Iterator[str]:
    """A new run id whose lock this process holds until the block ends."""
    directory = locks_dir(store)
    directory.mkdir(parents=True, exist_ok=True)
    run_id = "r" + uuid.uuid4().hex[:12]
    path = directory / f"{run_id}{LOCK_SUFFIX}"
    # Locked before it gets its name, so nobody ever sees the lock file free while we live.
    pending = directory / f".{run_id}.new"
    with pending.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        os.rename(pending, path)
        try:
            yield run_id
        finally:
            path.unlink(missing_ok=True)


def _alive(directory: Path, run_id: str) -> bool:
    handle: IO[str]
    try:
        handle = (directory / f"{run_id}{LOCK_SUFFIX}").open("r")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False  # closing the file releases the lock we just took


def owners(store: buildah.Storage, container_ids: Collection[str]) -> dict[str, str]:
    """container ID -> the run that made it, for those of CONTAINER_IDS a run made."""
    found = {}
    for container_id in sorted(container_ids):
        run_id = (buildah.build_args_of(store, container_id) or {}).get(RUN_ARG)
        if isinstance(run_id, str) and run_id:
            found[container_id] = run_id
    return found


def claim(store: buildah.Storage, run_id: str, name: str) -> Optional[str]:
    """Claim NAME (an image reference to push) for RUN_ID on this host; None when claimed
    (or already ours), else the live run that holds it. A dead run's claim is taken over.
    One lock over the claims makes look-and-take atomic between runs."""
    directory = locks_dir(store) / "claims"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / hashlib.sha256(name.encode()).hexdigest()
    with (directory / ".lock").open("a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            holder = path.read_text().strip()
        except FileNotFoundError:
            holder = ""
        if holder and holder != run_id and _alive(locks_dir(store), holder):
            return holder
        path.write_text(run_id + "\n")
    return None


@dataclass(frozen=True)
class Cleaned:
    removed: tuple[tuple[str, str], ...]  # (container ID, dead run that made it)
    live_runs: tuple[str, ...]  # runs whose containers were left alone: still running


def remove_dead(processes: Runner, store: buildah.Storage) -> Cleaned:
    """Remove the working containers of every run that is no longer alive."""
    directory = locks_dir(store)
    made = owners(store, buildah.containers(processes))
    runs = set(made.values())
    live = {run_id for run_id in runs if _alive(directory, run_id)}
    removed = set(buildah.remove_containers(
        processes, [cid for cid, run_id in made.items() if run_id not in live]))
    with contextlib.suppress(FileNotFoundError):
        for lock in directory.glob(f"*{LOCK_SUFFIX}"):
            if not _alive(directory, lock.name[:-len(LOCK_SUFFIX)]):
                lock.unlink(missing_ok=True)
    return Cleaned(removed=tuple((cid, made[cid]) for cid in sorted(removed)),
                   live_runs=tuple(sorted(live)))
