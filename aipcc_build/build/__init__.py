"""The build stage: `build_matrix` builds every selected image of a matrix concurrently in
dependency order, validates each between build and push, and pushes it. Callable without
the CLI: a benchmark, a test or another program passes one frozen request, an event
callback and a stop flag, and gets a `RunResult` back."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..errors import InputError
from ..matrix import EVERYTHING, Filters, ImageSpec, check_build_id, expand, load
from ..plan import BuildPlan, make_plan, outside_parents
from ..render import BUILD_ID_ARG, ensure_current
from ..tools import buildah
from ..tools.runner import ProcessRunner
from . import preflight, runs
from .schedule import (
    Event,
    ImageResult,
    LogLine,
    Planned,
    Retrying,
    RunResult,
    ScheduleOptions,
    Status,
    StatusChanged,
    ValidationOutcome,
    Warned,
    run,
)

__all__ = [
    "Event", "ImageResult", "LogLine", "MatrixBuild", "Planned", "Retrying", "RunResult",
    "Status", "StatusChanged", "ValidationOutcome", "Warned", "build_matrix", "clean",
    "plan_matrix", "validate_step",
]


@dataclass(frozen=True)
class MatrixBuild:
    """Everything one run of `build_matrix` needs, decided before it starts."""

    matrix_path: str
    filters: Filters = EVERYTHING
    build_id: str = "dev"
    registry: Optional[str] = None  # replaces the matrix's registry
    # Build id of from_image parents this run does not build (default: build_id): children
    # build FROM them, in `registry`.
    parent_build_id: Optional[str] = None
    jobs: int = 1
    capacity: Mapping[str, float] = field(default_factory=dict)  # over the host's cpu/memory
    history: Mapping[str, float] = field(default_factory=dict)  # build key -> seconds
    fail_fast: bool = False
    retries: int = 1
    build_timeout: Optional[float] = 4 * 3600.0  # seconds for one image's `buildah build`
    push_timeout: Optional[float] = 600.0  # seconds for one push attempt
    rerender: bool = False  # render stale Containerfiles first instead of refusing them
    allow_eol: bool = False
    push: bool = False
    tls_verify: bool = True
    log_dir: str = "logs"
    build_args: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    layers: Optional[bool] = None
    pull: Optional[str] = None
    # Where the kernel lists emulators (preflight.check_emulation); a test points it elsewhere.
    binfmt_dir: str = preflight.BINFMT_DIR


def plan_matrix(request: MatrixBuild) -> BuildPlan:
    """The plan `build_matrix` would run: what `matrix --dry-run` shows."""
    images = expand(load(request.matrix_path), build_id=request.build_id,
                    registry=request.registry, filters=request.filters)
    return make_plan(images)


def validate_step(image: ImageSpec, image_id: str) -> ValidationOutcome:
    """The validator as the scheduler's step between build and push."""
    from ..validate import validate_built

    outcome = validate_built(image, image_id)
    return ValidationOutcome(ok=outcome.exit_code == 0, message=outcome.problems(),
                             toolkits=outcome.toolkits(), warnings=outcome.warnings())


def build_matrix(request: MatrixBuild, on_event: Callable[[Event], None],
                 stop: threading.Event, *, processes: Optional[ProcessRunner] = None,
                 validate: Optional[Callable[[ImageSpec, str], ValidationOutcome]]
                 = validate_step) -> RunResult:
    """Build, validate and push every image REQUEST selects. Setting STOP (from a signal
    handler) stops the builds, removes what they left behind and returns what finished."""
    from .runner import BuildahRunner

    for name in ("build_timeout", "push_timeout"):
        value = getattr(request, name)
        if value is not None and not value > 0:
            raise InputError(f"must be a positive number of seconds, not {value:g}",
                             field=name)
    if BUILD_ID_ARG in request.build_args:
        raise InputError(f"{BUILD_ID_ARG} comes from the build id (it is part of every tag)",
                         field="build_args")
    if runs.RUN_ARG in request.build_args:
        raise InputError(f"{runs.RUN_ARG} is set by aipcc-build: it tells which run made a "
                         "working container", field="build_args")
    if request.parent_build_id is not None:
        check_build_id(request.parent_build_id, "parent_build_id")
    matrix = load(request.matrix_path)
    images = expand(matrix, build_id=request.build_id, registry=request.registry,
                    filters=request.filters)
    plan = make_plan(images)
    options = ScheduleOptions(
        log_dir=request.log_dir, jobs=request.jobs,
        capacity={**preflight.detect_capacity(), **request.capacity},
        retries=request.retries, build_timeout=request.build_timeout,
        push_timeout=request.push_timeout, fail_fast=request.fail_fast, push=request.push,
        tls_verify=request.tls_verify,
        build_args={**request.build_args, BUILD_ID_ARG: request.build_id},
        labels=request.labels, layers=request.layers, pull=request.pull,
        history=request.history,
        # A parent this run does not build is the one pushed under the parents' build id
        # (this one unless --parent-build-id) to this run's registry: never the matrix's
        # registry when --registry names another (per-image CI jobs build it there).
        parent_references=outside_parents(
            plan, expand(matrix, build_id=request.parent_build_id or request.build_id,
                         registry=request.registry)),
    )
    ensure_current(matrix, request.filters, rerender=request.rerender)
    on_event(Planned(plan))
    for message in preflight.check_eol(images, dt.date.today(), request.allow_eol):
        on_event(Warned(f"{message}: building it because end-of-life builds are allowed"))
    preflight.check_contexts(images)
    preflight.check_emulation(plan, request.binfmt_dir)
    processes = processes or ProcessRunner()
    buildah.check_version(processes)
    store = buildah.storage(processes)
    with runs.hold(store) as run_id:
        for container_id, dead_run in runs.remove_dead(processes, store).removed:
            on_event(Warned(f"removed working container {container_id[:12]}, left by run "
                            f"{dead_run} that is no longer running"))
        return run(plan, options, BuildahRunner(processes, run_id, store), on_event, stop,
                   validate=validate)


def clean(processes: Optional[ProcessRunner] = None) -> runs.Cleaned:
    """Remove the working containers that runs no longer alive left (killed with SIGKILL,
    a crashed host); a live run's are never touched."""
    processes = processes or ProcessRunner()
    buildah.check_version(processes)
    return runs.remove_dead(processes, buildah.storage(processes))
