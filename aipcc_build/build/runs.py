"""Which working containers belong to which run, and whether that run is still alive.

Every build of a run starts from a tag only this run uses, `localhost/aipcc-run/<run>-<n>`
(`buildah build --from`), so buildah names its working container `<run>-<n>-working-container`:
the name says whose it is. A run holds an exclusive `flock` on `<run>.lock` in the run
directory for as long as it lives; `clean` removes the containers and tags of runs whose lock
nobody holds (killed with SIGKILL, a crashed host) and never those of a live run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Optional

from ..tools import buildah
from ..tools.runner import Runner

TAG_REPOSITORY = "localhost/aipcc-run"
RUN_ID = re.compile(r"r[0-9a-f]{12}")
CONTAINER_NAME = re.compile(rf"^({RUN_ID.pattern})-\d+-working-container(?:-\d+)?$")
TAG = re.compile(rf"^{re.escape(TAG_REPOSITORY)}/({RUN_ID.pattern})-\d+(?::.*)?$")


def run_dir(environ: Mapping[str, str]) -> Path:
    """Where run locks live: AIPCC_BUILD_RUN_DIR, else $XDG_RUNTIME_DIR/aipcc-build, else
    /run/aipcc-build when writable, else ~/.cache/aipcc-build/runs."""
    if environ.get("AIPCC_BUILD_RUN_DIR"):
        return Path(environ["AIPCC_BUILD_RUN_DIR"])
    if environ.get("XDG_RUNTIME_DIR"):
        return Path(environ["XDG_RUNTIME_DIR"]) / "aipcc-build"
    if os.access("/run", os.W_OK):
        return Path("/run/aipcc-build")
    return Path.home() / ".cache" / "aipcc-build" / "runs"


def base_tag(run_id: str, number: int) -> str:
    return f"{TAG_REPOSITORY}/{run_id}-{number}:latest"


@contextlib.contextmanager
def run_lock(environ: Mapping[str, str]) -> Iterator[str]:
    """A new run id, locked (with this pid inside) until the block ends."""
    directory = run_dir(environ)
    directory.mkdir(parents=True, exist_ok=True)
    run_id = "r" + uuid.uuid4().hex[:12]
    path = directory / f"{run_id}.lock"
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield run_id
        finally:
            path.unlink(missing_ok=True)


def alive(run_id: str, environ: Mapping[str, str]) -> bool:
    """Whether the run holds its lock. A run without a lock file is not alive."""
    path = run_dir(environ) / f"{run_id}.lock"
    handle: Optional[IO[str]] = None
    try:
        handle = path.open("r+")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


@dataclass(frozen=True)
class Cleaned:
    containers: tuple[str, ...]  # names removed
    tags: tuple[str, ...]  # run tags removed
    live_runs: tuple[str, ...]  # runs left alone: still running


def ours(names: Mapping[str, str], run_id: str) -> list[str]:
    """IDs of the working containers (id -> name) that RUN_ID's builds made."""
    return [cid for cid, name in sorted(names.items())
            if (match := CONTAINER_NAME.match(name)) and match.group(1) == run_id]


def untag_run(processes: Runner, run_id: str) -> None:
    """Remove every base tag RUN_ID made (a build stopped between tag and untag)."""
    buildah.untag(processes, buildah.tags(processes, f"{TAG_REPOSITORY}/{run_id}-"))


def clean(processes: Runner, environ: Mapping[str, str]) -> Cleaned:
    """Remove the working containers and base tags of every run that is no longer alive."""
    names = buildah.container_names(processes)
    tags = buildah.tags(processes, TAG_REPOSITORY + "/")
    runs = {m.group(1) for m in map(CONTAINER_NAME.match, names.values()) if m}
    runs |= {m.group(1) for m in map(TAG.match, tags) if m}
    live = {run for run in runs if alive(run, environ)}
    containers = [cid for run in sorted(runs - live) for cid in ours(names, run)]
    buildah.remove_containers(processes, containers)
    dead_tags = [tag for tag in tags if (m := TAG.match(tag)) and m.group(1) not in live]
    buildah.untag(processes, dead_tags)
    for run in runs - live:
        (run_dir(environ) / f"{run}.lock").unlink(missing_ok=True)
    return Cleaned(containers=tuple(names[cid] for cid in containers),
                   tags=tuple(dead_tags), live_runs=tuple(sorted(live)))
