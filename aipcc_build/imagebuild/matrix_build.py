"""`build_matrix`: builds every selected image of a matrix concurrently in dependency
order, validates each between build and push, and pushes it. Callable without the CLI: a
benchmark, a test or another program passes one frozen request, an event callback and a
stop flag, and gets a `RunResult` back."""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from .. import defaults
from ..errors import InputError
from ..matrix import EVERYTHING, Filters, ImageSpec, check_build_id, expand, load
from ..plan import BuildPlan, make_plan, outside_parents
from ..render import BUILD_ID_ARG, ensure_current
from ..tools import buildah
from ..tools.runner import ProcessRunner
from . import preflight, runs
from .outcomes import Event, Planned, RunResult, ValidationOutcome, Warned
from .schedule_options import ScheduleOptions
from .scheduler import run


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
    rerender: bool = False  # render stale Containerfiles first instead of refusing them
    allow_eol: bool = False
    # The build report the run writes when it ends, however it ends (None: none); its
    # directory is checked before the first build
    report_path: Optional[str] = defaults.REPORT_FILE
    # Build without first asking each image's wheel index whether it answers (a new
    # version tried before its index exists): a warning says the check was skipped
    skip_wheel_index_check: bool = False
    # How the run goes; its capacity is added over the host's cpu/memory, its build args
    # get the build id.
    schedule: ScheduleOptions = field(default_factory=ScheduleOptions)
    # Where the kernel lists emulators (preflight.check_emulation); a test points it elsewhere.
    binfmt_dir: str = preflight.BINFMT_DIR

    def __post_init__(self) -> None:
        # Both ids go into tags: one rule for both, checked before a dry run as before a
        # build.
        check_build_id(self.build_id)
        if self.parent_build_id is not None:
            check_build_id(self.parent_build_id, "parent_build_id")


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
                             toolkits=outcome.toolkits(), warnings=outcome.warnings(),
                             gpu_code=outcome.gpu_code(), verdicts=outcome.verdicts)


def build_matrix(request: MatrixBuild, on_event: Callable[[Event], None],
                 stop: threading.Event, *, processes: Optional[ProcessRunner] = None,
                 validate: Optional[Callable[[ImageSpec, str], ValidationOutcome]]
                 = validate_step) -> RunResult:
    """Build, validate and push every image REQUEST selects, and write its build report.
    Setting STOP (from a signal handler) stops the builds, removes what they left behind
    and returns what finished (reported too)."""
    from . import build_report
    from .buildah_builder import BuildahBuilder

    given = request.schedule
    for name in ("build_timeout", "push_timeout", "push_stall"):
        value = getattr(given, name)
        if value is not None and not value > 0:
            raise InputError(f"must be a positive number of seconds, not {value:g}",
                             field=name)
    if BUILD_ID_ARG in given.build_args:
        raise InputError(f"{BUILD_ID_ARG} comes from the build id (it is part of every tag)",
                         field="build_args")
    if runs.RUN_ARG in given.build_args:
        raise InputError(f"{runs.RUN_ARG} is set by aipcc-build: it tells which run made a "
                         "working container", field="build_args")
    if request.report_path is not None:
        build_report.check_writable(request.report_path, field="report_path")
    matrix = load(request.matrix_path)
    images = expand(matrix, build_id=request.build_id, registry=request.registry,
                    filters=request.filters)
    plan = make_plan(images)
    options = replace(
        given,
        capacity={**preflight.detect_capacity(), **given.capacity},
        build_args={**given.build_args, BUILD_ID_ARG: request.build_id},
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
    preflight.check_requirements(images)
    preflight.check_emulation(plan, request.binfmt_dir)
    if not request.skip_wheel_index_check:
        preflight.check_wheel_indexes(images, retry=given.retry)
    elif any(image.wheel_index for image in images):
        on_event(Warned("the wheel indexes were not checked before the builds: an image "
                        "whose index serves nothing fails at its pip step"))
    processes = processes or ProcessRunner()
    buildah.check_version(processes)
    if given.push:
        preflight.check_registries([image.reference for image in images], given.tls_verify,
                                   processes.environ, retry=given.retry)
    store = buildah.storage(processes)
    with runs.hold(store) as run_id:
        for container_id, dead_run in runs.remove_dead(processes, store).removed:
            on_event(Warned(f"removed working container {container_id[:12]}, left by run "
                            f"{dead_run} that is no longer running"))
        result = run(plan, options, BuildahBuilder(processes, run_id, store), on_event, stop,
                     validate=validate)
    return reported(replace(result, registry=request.registry or matrix.registry,
                            product=matrix.product), request)


def reported(result: RunResult, request: MatrixBuild) -> RunResult:
    """RESULT once its build report is written where REQUEST asks (`report_path`), or with
    the `report_error` that stopped it: the builds are done and pushed, the caller says it."""
    from . import build_report

    if request.report_path is None:
        return result
    try:
        build_report.write(result, request.build_id, request.report_path)
    except OSError as exc:
        return replace(result, report_error=exc)
    return replace(result, report_path=request.report_path)


def clean(processes: Optional[ProcessRunner] = None) -> runs.Cleaned:
    """Remove the working containers that runs no longer alive left (killed with SIGKILL,
    a crashed host); a live run's are never touched."""
    processes = processes or ProcessRunner()
    buildah.check_version(processes)
    return runs.remove_dead(processes, buildah.storage(processes))
