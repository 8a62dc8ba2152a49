"""Run a build plan: concurrent builds in dependency order, within job and resource limits.

The core of `aipcc-build matrix`. It never prints: it reports typed events through a
callback (rendered by `report`) and returns a `RunResult`. The outside world comes in
through a `Runner` (the real one is `build.runner.BuildahRunner`; unit tests use a fake)
and an optional validation step called between a successful build and its push.

Threads: the main loop (the caller's thread) owns all state and emits every event; one
worker thread per running image builds, validates and pushes it, and talks to the main
loop through a queue.

A multi-platform image is one build per platform (emulated platforms hold an `emulation`
slot besides the image's own resources); each platform's worker builds and validates, then
waits as BUILT. When every platform of the image is BUILT, one more worker joins them in a
manifest list under the image's reference and pushes the list with its instances; when one
platform fails, the others are not joined (SKIPPED) and the list is never pushed.
"""

from __future__ import annotations

import enum
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Protocol, TypeVar, Union

from ..matrix import ImageSpec
from ..matrix.platforms import EMULATION_SLOWDOWN, describe
from ..plan import BuildPlan, PlannedBuild

# The slot each emulated build holds; the capacity's default is in preflight.
EMULATION_SLOT = "emulation"

LOG_TAIL_LINES = 30


class Status(str, enum.Enum):
    QUEUED = "queued"
    BUILDING = "building"
    VALIDATING = "validating"
    BUILT = "built"  # one platform of several, validated: waits for the manifest list
    PUSHING = "pushing"
    OK = "ok"
    FAILED = "failed"  # build or validation failed
    SKIPPED = "skipped"  # an image it is built FROM failed
    PUSH_FAILED = "push-failed"  # built (and validated) but not pushed
    CANCELLED = "cancelled"  # stopped or never started: --fail-fast or an interruption

    @property
    def final(self) -> bool:
        return self in FINAL


FINAL = {Status.OK, Status.FAILED, Status.SKIPPED, Status.PUSH_FAILED, Status.CANCELLED}


# ---- what goes in and out of a runner ---------------------------------------------------

@dataclass(frozen=True)
class BuildJob:
    image: ImageSpec
    # What `buildah build --from` names: the parent's freshly built local image ID, or the
    # reference of a parent this run does not build (--parent-build-id); None: the FROM line.
    from_image: Optional[str]
    build_args: Mapping[str, str]
    labels: Mapping[str, str]
    layers: Optional[bool]
    pull: Optional[str]
    platform: Optional[str]  # buildah's --platform; None: the host's
    # Seconds before the runner kills a `buildah build` / `buildah push` that has not ended
    # (a registry that accepts the connection and never answers); None: no limit.
    build_timeout: Optional[float] = None
    push_timeout: Optional[float] = None
    containerfile: str = ""  # this platform's; "" = the image's
    tag: str = ""  # the local name of what is built; "" = the image's reference


@dataclass(frozen=True)
class ListJob:
    """Join the platform instances of IMAGE in a manifest list named by its reference."""

    image: ImageSpec
    instances: Mapping[str, str]  # platform -> local image ID
    push_timeout: Optional[float] = None


@dataclass(frozen=True)
class ListOutcome:
    ok: bool
    digest: str = ""  # the list's, once pushed
    instance_digests: Mapping[str, str] = field(default_factory=dict)  # platform -> digest
    error: str = ""
    stopped: bool = False


@dataclass(frozen=True)
class BuildOutcome:
    ok: bool
    image_id: str = ""
    error: str = ""
    transient: bool = False  # a pull or network error worth retrying
    stopped: bool = False  # ended by Runner.stop


@dataclass(frozen=True)
class PushOutcome:
    ok: bool
    digest: str = ""
    error: str = ""
    stopped: bool = False


@dataclass(frozen=True)
class ValidationOutcome:
    ok: bool
    message: str = ""
    toolkits: Mapping[str, Sequence[str]] = field(default_factory=dict)  # "cuda": ["12.8.90"]
    warnings: tuple[str, ...] = ()  # findings that do not fail the image, one line each


# The validation step: (image, local image ID) -> outcome. The validator lands separately.
Validate = Callable[[ImageSpec, str], ValidationOutcome]


class Runner(Protocol):
    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutcome: ...

    def push(self, job: BuildJob, image_id: str, tls_verify: bool,
             on_line: Callable[[str], None]) -> PushOutcome: ...

    def make_list(self, job: ListJob, on_line: Callable[[str], None]) -> ListOutcome:
        """Create (replace) the local manifest list of JOB's instances."""

    def push_list(self, job: ListJob, tls_verify: bool,
                  on_line: Callable[[str], None]) -> ListOutcome:
        """Push the list and its instances; the digests as the registry has them."""

    def stop(self) -> None:
        """Stop every running child (terminate, then kill after a grace time); the calls
        in progress return `stopped` outcomes and later calls start nothing."""

    def remove_leftovers(self) -> list[str]:
        """Remove what stopped children left behind (working containers)."""


# ---- options, events, results -----------------------------------------------------------

@dataclass(frozen=True)
class ScheduleOptions:
    log_dir: str
    jobs: int = 1
    capacity: Mapping[str, float] = field(default_factory=dict)
    retries: int = 1
    retry_delay: float = 2.0  # seconds before the first retry; doubles after each
    max_retry_delay: float = 60.0  # ... up to this
    build_timeout: Optional[float] = 4 * 3600.0  # seconds for one `buildah build`
    push_timeout: Optional[float] = 600.0  # seconds for one `buildah push` attempt
    fail_fast: bool = False
    push: bool = False
    tls_verify: bool = True
    build_args: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    layers: Optional[bool] = None
    pull: Optional[str] = None
    history: Mapping[str, float] = field(default_factory=dict)  # key -> seconds
    # key -> reference of its from_image parent, for parents outside the plan
    parent_references: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StatusChanged:
    key: str
    status: Status
    message: str = ""
    log_tail: tuple[str, ...] = ()  # set on failures


@dataclass(frozen=True)
class LogLine:
    key: str
    line: str


@dataclass(frozen=True)
class Retrying:
    key: str
    action: str  # "build" or "push"
    attempt: int  # the attempt about to start, from 2
    delay: float
    error: str


@dataclass(frozen=True)
class Planned:
    """First event of a run: what will be built, in plan order."""

    plan: BuildPlan


@dataclass(frozen=True)
class Warned:
    """Something the user should know before the builds start."""

    message: str


Event = Union[StatusChanged, LogLine, Retrying, Planned, Warned]
_Outcome = TypeVar("_Outcome", BuildOutcome, PushOutcome, ListOutcome)


@dataclass(frozen=True)
class ImageResult:
    image: ImageSpec
    status: Status
    log: str
    image_id: str = ""
    digest: str = ""
    start: Optional[float] = None  # epoch seconds
    built: Optional[float] = None  # built and validated: dependents could start
    end: Optional[float] = None  # after the push, if any
    retries: int = 0
    message: str = ""
    toolkits: Optional[Mapping[str, Sequence[str]]] = None  # None: not validated
    log_tail: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # the validator's
    platform: str = ""  # the platform built; "" for a hand-made plan
    list_digest: str = ""  # the manifest list holding this platform's instance, pushed

    @property
    def key(self) -> str:
        from ..plan.dag import node_key

        return node_key(self.image, self.platform)

    @property
    def duration(self) -> Optional[float]:
        if self.start is None or self.end is None:
            return None
        return self.end - self.start

    @property
    def build_duration(self) -> Optional[float]:
        if self.start is None or self.built is None:
            return None
        return self.built - self.start


@dataclass(frozen=True)
class RunResult:
    images: tuple[ImageResult, ...]  # plan order
    start: float
    end: float
    stopped_by: Optional[str] = None  # "interrupt" or "fail-fast"

    @property
    def ok(self) -> bool:
        return all(result.status is Status.OK for result in self.images)


def log_path(log_dir: str, image: ImageSpec, platform: str = "") -> str:
    """DIR/kind/name.log; DIR/kind/name-arch.log for one platform of several."""
    name = f"{image.name}-{describe(platform).arch}" if image.multi_platform else image.name
    return str(Path(log_dir) / image.kind / f"{name}.log")


def resources(build: PlannedBuild) -> Mapping[str, float]:
    """What a build holds while it runs: its kind's resources, plus an emulation slot on a
    foreign platform (qemu makes it CPU-bound several times over)."""
    if not build.emulated:
        return build.image.resources
    return {**build.image.resources,
            EMULATION_SLOT: build.image.resources.get(EMULATION_SLOT, 0.0) + 1.0}


# ---- the scheduler ----------------------------------------------------------------------

def priorities(plan: BuildPlan, history: Mapping[str, float]) -> dict[str, float]:
    """Length of the longest dependency path from each build to the end of the plan,
    counting the build itself: recorded durations when known (per platform), else the
    mean of those recorded, else one unit per build; a build with no record on an emulated
    platform counts EMULATION_SLOWDOWN times its native estimate."""
    default = sum(history.values()) / len(history) if history else 1.0
    dependents = plan.dependents()
    result: dict[str, float] = {}
    for build in reversed(plan.builds):  # dependents come later in the plan
        key = build.key
        own = history.get(key)
        if own is None:
            native = history.get(build.image.key, default)
            own = native * EMULATION_SLOWDOWN if build.emulated else native
        result[key] = own + max((result[child] for child in dependents[key]), default=0.0)
    return result


def run(plan: BuildPlan, options: ScheduleOptions, runner: Runner,
        on_event: Callable[[Event], None], stop: threading.Event,
        validate: Optional[Validate] = None) -> RunResult:
    """Build (validate, push) every image of PLAN. Setting STOP (from a signal handler)
    stops the children, removes what they left and returns what finished."""
    return _Scheduler(plan, options, runner, on_event, stop, validate).run()


@dataclass(frozen=True)
class _Message:
    """Worker -> main loop."""

    key: str
    event: Optional[Event] = None  # to pass on
    released: bool = False  # built: the build's job and resource slots are free
    built_id: Optional[str] = None  # built and validated: dependents may start
    result: Optional[ImageResult] = None  # the worker is done
    joined: Optional[Mapping[str, ImageResult]] = None  # a list worker is done: by key


class _Scheduler:
    def __init__(self, plan: BuildPlan, options: ScheduleOptions, runner: Runner,
                 on_event: Callable[[Event], None], stop: threading.Event,
                 validate: Optional[Validate]) -> None:
        self.plan = plan
        self.options = options
        self.runner = runner
        self.on_event = on_event
        self.stop = stop
        self.validate = validate
        self.builds = {build.key: build for build in plan.builds}
        self.dependents = plan.dependents()
        self.siblings = plan.siblings()  # image key -> its platform builds, when several
        self.priority = priorities(plan, options.history)
        self.results: dict[str, ImageResult] = {
            key: ImageResult(image=build.image, status=Status.QUEUED, platform=build.platform,
                             log=log_path(options.log_dir, build.image, build.platform))
            for key, build in self.builds.items()
        }
        self.built_ids: dict[str, str] = {}
        self.holding: dict[str, Mapping[str, float]] = {}  # key -> resources held
        self.workers: dict[str, threading.Thread] = {}
        self.messages: queue.Queue[_Message] = queue.Queue()
        self.cancelled = threading.Event()  # workers: start nothing new
        # Validating and pushing hold no build slot (the next build starts meanwhile), but
        # at most --jobs of each run at once.
        self.check_slots = threading.Semaphore(max(1, options.jobs))
        self.push_slots = threading.Semaphore(max(1, options.jobs))
        self.stopped_by: Optional[str] = None
        self.joined: set[str] = set()  # images whose manifest list was started or refused

    # -- main loop --

    def run(self) -> RunResult:
        start = time.time()
        self._fail_unsatisfiable()
        while True:
            if self.stop.is_set() and self.stopped_by is None:
                self._cancel("interrupt")
            if self.stopped_by is None:
                self._start_ready()
            if not self.workers:
                break
            try:
                message = self.messages.get(timeout=0.1)
            except queue.Empty:
                continue
            self._handle(message)
        if self.stopped_by is not None:
            self.runner.remove_leftovers()
        for key, result in self.results.items():
            if result.status is Status.BUILT:
                self._finish(key, Status.CANCELLED, f"built, not joined ({self.stopped_by})")
            elif not result.status.final:  # never started
                self._finish(key, Status.CANCELLED, f"not started ({self.stopped_by})")
        return RunResult(images=tuple(self.results[b.key] for b in self.plan.builds),
                         start=start, end=time.time(), stopped_by=self.stopped_by)

    def _fail_unsatisfiable(self) -> None:
        """A build needing more of a slot than the capacity has would wait forever."""
        capacity = self.options.capacity
        for key, build in self.builds.items():
            for slot, amount in sorted(resources(build).items()):
                have = capacity.get(slot, 0.0)
                if amount <= have or self.results[key].status.final:
                    continue
                if have <= 0:
                    why = (f"needs {slot}={_amount(amount)} but no capacity provides "
                           f"'{slot}' (add the slot to the capacity: {slot}=N)")
                else:
                    why = (f"needs {slot}={_amount(amount)} but the capacity is "
                           f"{slot}={_amount(have)} (raise the capacity)")
                self._write_log(key, [why])
                self._finish(key, Status.FAILED, why, log_tail=(why,))
                self._skip_dependents(key)

    def _ready(self) -> list[str]:
        ready = [
            key for key, build in self.builds.items()
            if self.results[key].status is Status.QUEUED and key not in self.workers
            and all(need in self.built_ids for need in build.needs)
        ]
        # Longest remaining path first; plan order breaks ties.
        return sorted(ready, key=lambda key: -self.priority[key])

    def _start_ready(self) -> None:
        for key in self._ready():
            if len(self.holding) >= self.options.jobs:
                return
            build = self.builds[key]
            needs = resources(build)
            if not self._fits(needs):
                continue  # a smaller build may fit meanwhile
            self.holding[key] = needs
            parent = build.needs[0] if build.needs else None
            job = BuildJob(
                image=build.image,
                from_image=self.built_ids[parent] if parent
                else self.options.parent_references.get(key),
                build_args=self.options.build_args, labels=self.options.labels,
                layers=self.options.layers, pull=self.options.pull,
                # The host's own platform needs no flag unless a list joins it with others.
                platform=build.platform if build.emulated or build.image.multi_platform
                else None,
                build_timeout=self.options.build_timeout,
                push_timeout=self.options.push_timeout,
                containerfile=build.containerfile, tag=build.tag,
            )
            self.results[key] = replace(self.results[key], status=Status.BUILDING,
                                        start=time.time())
            self.on_event(StatusChanged(key, Status.BUILDING))
            worker = threading.Thread(target=self._work, args=(key, job),
                                      name=f"build {key}", daemon=True)
            self.workers[key] = worker
            worker.start()

    def _fits(self, needs: Mapping[str, float]) -> bool:
        for slot, amount in needs.items():
            used = sum(held.get(slot, 0.0) for held in self.holding.values())
            if used + amount > self.options.capacity.get(slot, 0.0):
                return False
        return True

    def _handle(self, message: _Message) -> None:
        key = message.key
        if message.event is not None:
            if isinstance(message.event, StatusChanged):
                self.results[key] = replace(self.results[key], status=message.event.status)
            self.on_event(message.event)
        if message.released:
            self.holding.pop(key, None)
        if message.built_id is not None:
            self.built_ids[key] = message.built_id
            self.holding.pop(key, None)
        if message.joined is not None:
            self.workers.pop(key).join()
            for child, result in message.joined.items():
                self.results[child] = result
                self.on_event(StatusChanged(child, result.status, result.message,
                                            result.log_tail))
            if self.options.fail_fast and any(
                    r.status is Status.PUSH_FAILED for r in message.joined.values()):
                self._cancel("fail-fast")
        if message.result is not None:
            worker = self.workers.pop(key, None)
            if worker is not None:
                worker.join()
            self.holding.pop(key, None)
            result = message.result
            self.results[key] = result
            if result.status is Status.FAILED:
                self._skip_dependents(key)
            self.on_event(StatusChanged(key, result.status, result.message, result.log_tail))
            if result.status in (Status.FAILED, Status.PUSH_FAILED) and self.options.fail_fast:
                self._cancel("fail-fast")
            self._join_ready()

    def _cancel(self, reason: str) -> None:
        self.stopped_by = reason
        self.cancelled.set()
        self.runner.stop()

    def _skip_dependents(self, key: str) -> None:
        for child in self.dependents[key]:
            if not self.results[child].status.final:
                self._finish(child, Status.SKIPPED, f"{key} failed")
                self._skip_dependents(child)

    def _join_ready(self) -> None:
        """Start the manifest list of each image whose platforms are all BUILT; an image
        with a failed platform is not joined: its BUILT platforms end SKIPPED."""
        for image_key, keys in self.siblings.items():
            if image_key in self.workers or image_key in self.joined:
                continue
            states = [self.results[key].status for key in keys]
            if not all(s is Status.BUILT or s.final for s in states):
                continue  # some platform still builds
            if self.stopped_by is not None:
                continue  # run() cancels what is left
            self.joined.add(image_key)
            failed = [self.results[k] for k in keys if self.results[k].status is not Status.BUILT]
            if failed:
                why = "; ".join(f"{r.platform} {r.status.value}" for r in failed)
                for key in keys:
                    if self.results[key].status is Status.BUILT:
                        self._finish(key, Status.SKIPPED, f"no manifest list: {why}")
                continue
            worker = threading.Thread(target=self._join, args=(image_key, keys),
                                      name=f"list {image_key}", daemon=True)
            self.workers[image_key] = worker
            worker.start()

    def _finish(self, key: str, status: Status, message: str,
                log_tail: tuple[str, ...] = ()) -> None:
        self.results[key] = replace(self.results[key], status=status, message=message,
                                    log_tail=log_tail)
        self.on_event(StatusChanged(key, status, message, log_tail))

    def _write_log(self, key: str, lines: Sequence[str]) -> None:
        """Best effort: the lines are also the image's message and log tail."""
        path = Path(self.results[key].log)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\n" for line in lines))
        except OSError:
            pass

    # -- worker (one thread per running image) --

    def _work(self, key: str, job: BuildJob) -> None:
        """Any exception (an unwritable log, a full disk, a runner bug) fails this image
        with the error as its message: a worker that ends without a result would leave the
        main loop waiting for it forever."""
        result = self.results[key]  # read once: the main loop replaces it
        sent: list[bool] = []
        try:
            self._work_on(key, job, result, sent)
        except Exception as exc:
            if sent:  # the result went out; closing the log failed after it
                return
            message = f"{type(exc).__name__}: {exc}"
            self.messages.put(_Message(key, result=replace(
                result, status=Status.FAILED, message=message, end=time.time(),
                log_tail=(message,))))

    def _work_on(self, key: str, job: BuildJob, result: ImageResult,
                 sent: list[bool]) -> None:
        tail: list[str] = []
        path = Path(result.log)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", errors="replace") as log:

            def line(text: str) -> None:
                log.write(text + "\n")
                log.flush()
                tail.append(text)
                del tail[:-LOG_TAIL_LINES]
                self.messages.put(_Message(key, event=LogLine(key, text)))

            def status(new: Status) -> None:
                self.messages.put(_Message(key, event=StatusChanged(key, new)))

            built_at: list[float] = []
            warned: list[str] = []

            def done(status: Status, message: str = "", *, retries: int, image_id: str = "",
                     digest: str = "",
                     toolkits: Optional[Mapping[str, Sequence[str]]] = None) -> None:
                failed = status in (Status.FAILED, Status.PUSH_FAILED)
                final = replace(result, status=status, message=message, end=time.time(),
                                built=built_at[0] if built_at else None,
                                log_tail=tuple(tail) if failed else (), retries=retries,
                                image_id=image_id, digest=digest, toolkits=toolkits,
                                warnings=tuple(warned))
                sent.append(True)
                self.messages.put(_Message(key, result=final))

            built, retries = self._attempt("build", key, line,
                                           lambda: self.runner.build(job, line))
            if built.stopped or (not built.ok and self.cancelled.is_set()):
                return done(Status.CANCELLED, "stopped", retries=retries)
            if not built.ok:
                return done(Status.FAILED, built.error, retries=retries)
            toolkits: Optional[Mapping[str, Sequence[str]]] = None
            if self.validate is not None:
                self.messages.put(_Message(key, released=True))
                status(Status.VALIDATING)
                try:
                    with self.check_slots:
                        checked = self.validate(job.image, built.image_id)
                except Exception as exc:  # a validator bug must not take the run down
                    checked = ValidationOutcome(ok=False, message=f"validator error: {exc}")
                toolkits = checked.toolkits
                for warning in checked.warnings:
                    line(f"validation warning: {warning}")
                warned.extend(checked.warnings)
                if not checked.ok:
                    # Which platform, when a list would join several: only it is at fault.
                    where = f" on {job.platform}" if job.image.multi_platform else ""
                    line(f"validation failed{where}: {checked.message}")
                    return done(Status.FAILED, f"validation failed{where}: {checked.message}",
                                image_id=built.image_id, retries=retries, toolkits=toolkits)
            built_at.append(time.time())
            self.messages.put(_Message(key, built_id=built.image_id))
            if job.image.multi_platform:  # the list worker joins and pushes it
                return done(Status.BUILT, image_id=built.image_id, retries=retries,
                            toolkits=toolkits)
            if not self.options.push:
                return done(Status.OK, image_id=built.image_id, retries=retries,
                            toolkits=toolkits)
            if self.cancelled.is_set():
                return done(Status.CANCELLED, "built, not pushed (stopped)",
                            image_id=built.image_id, retries=retries, toolkits=toolkits)
            status(Status.PUSHING)
            with self.push_slots:
                pushed, push_retries = self._attempt(
                    "push", key, line,
                    lambda: self.runner.push(job, built.image_id, self.options.tls_verify,
                                             line))
            retries += push_retries
            if pushed.ok:
                return done(Status.OK, image_id=built.image_id, digest=pushed.digest,
                            retries=retries, toolkits=toolkits)
            if pushed.stopped or self.cancelled.is_set():
                return done(Status.CANCELLED, "built, push stopped", image_id=built.image_id,
                            retries=retries, toolkits=toolkits)
            return done(Status.PUSH_FAILED,
                        f"push to {job.image.reference} failed after {push_retries + 1} "
                        f"attempt(s): {pushed.error}",
                        image_id=built.image_id, retries=retries, toolkits=toolkits)

    def _join(self, image_key: str, keys: Sequence[str]) -> None:
        """The list worker: join the BUILT platforms of one image, push the list."""
        results = {key: self.results[key] for key in keys}  # read once
        image = results[keys[0]].image
        job = ListJob(image=image,
                      instances={r.platform: r.image_id for r in results.values()},
                      push_timeout=self.options.push_timeout)
        first = keys[0]

        def line(text: str) -> None:
            self.messages.put(_Message(first, event=LogLine(first, text)))

        def finish(status: Status, message: str = "", outcome: Optional[ListOutcome] = None,
                   retries: int = 0) -> None:
            now = time.time()
            digests = outcome.instance_digests if outcome else {}
            self.messages.put(_Message(image_key, joined={
                key: replace(result, status=status, message=message, end=now,
                             retries=result.retries + retries,
                             digest=digests.get(result.platform, ""),
                             list_digest=outcome.digest if outcome else "")
                for key, result in results.items()}))

        try:
            made = self.runner.make_list(job, line)
            if not made.ok:
                return finish(Status.FAILED, f"manifest list {image.reference}: {made.error}")
            if not self.options.push:
                return finish(Status.OK)
            if self.cancelled.is_set():
                return finish(Status.CANCELLED, "built, not pushed (stopped)")
            for key in keys:
                self.messages.put(_Message(key, event=StatusChanged(key, Status.PUSHING)))
            with self.push_slots:
                pushed, retries = self._attempt(
                    "push", first, line,
                    lambda: self.runner.push_list(job, self.options.tls_verify, line))
            if pushed.ok:
                return finish(Status.OK, outcome=pushed, retries=retries)
            if pushed.stopped or self.cancelled.is_set():
                return finish(Status.CANCELLED, "built, push stopped", retries=retries)
            return finish(Status.PUSH_FAILED,
                          f"push of the manifest list {image.reference} failed after "
                          f"{retries + 1} attempt(s): {pushed.error}", retries=retries)
        except Exception as exc:  # as in _work: the main loop must hear back
            finish(Status.FAILED, f"{type(exc).__name__}: {exc}")

    def _attempt(self, action: str, key: str, line: Callable[[str], None],
                 call: Callable[[], _Outcome]) -> tuple[_Outcome, int]:
        """Call, retrying with backoff: builds on transient errors, pushes on any error
        (a push has no template step that could fail for good)."""
        retries = 0
        while True:
            outcome = call()
            retryable = outcome.transient if isinstance(outcome, BuildOutcome) else True
            if outcome.ok or outcome.stopped or not retryable \
                    or retries >= self.options.retries or self.cancelled.is_set():
                return outcome, retries
            delay = min(self.options.retry_delay * 2 ** retries, self.options.max_retry_delay)
            retries += 1
            line(f"{action} failed ({outcome.error}); attempt {retries + 1} in {delay:g} s")
            self.messages.put(_Message(key, event=Retrying(key, action, retries + 1, delay,
                                                           outcome.error)))
            if self.cancelled.wait(delay):
                return outcome, retries


def _amount(value: float) -> str:
    return f"{value:g}"
