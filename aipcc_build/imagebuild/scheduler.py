"""Run a build plan: concurrent builds in dependency order, within job and resource limits.

The core of `aipcc-build matrix`. It never prints: it reports typed events through a
callback (rendered by `report`) and returns a `RunResult`. The outside world comes in
through a `Builder` (the real one is `buildah_builder.BuildahBuilder`; unit tests use a
fake) and an optional validation step called between a successful build and its push.

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

import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

from ..matrix import ImageSpec
from ..matrix.platforms import EMULATION_SLOWDOWN, describe
from ..plan import BuildPlan, PlannedBuild
from .builder import Builder, BuildJob
from .outcomes import Event, ImageResult, RunResult, Status, StatusChanged
from .schedule_options import ScheduleOptions
from .worker import Message, Validate, Worker

# The slot each emulated build holds; the capacity's default is in preflight.
EMULATION_SLOT = "emulation"


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


def run(plan: BuildPlan, options: ScheduleOptions, builder: Builder,
        on_event: Callable[[Event], None], stop: threading.Event,
        validate: Optional[Validate] = None) -> RunResult:
    """Build (validate, push) every image of PLAN. Setting STOP (from a signal handler)
    stops the children, removes what they left and returns what finished."""
    return _Scheduler(plan, options, builder, on_event, stop, validate).run()


class _Scheduler:
    def __init__(self, plan: BuildPlan, options: ScheduleOptions, builder: Builder,
                 on_event: Callable[[Event], None], stop: threading.Event,
                 validate: Optional[Validate]) -> None:
        self.plan = plan
        self.options = options
        self.builder = builder
        self.on_event = on_event
        self.stop = stop
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
        self.messages: queue.Queue[Message] = queue.Queue()
        self.cancelled = threading.Event()  # workers: start nothing new
        self.worker = Worker(builder, options, self.messages.put, validate, self.cancelled)
        self.stopped_by: Optional[str] = None
        self.joined: set[str] = set()  # images whose manifest list was started or refused

    # -- main loop --

    def run(self) -> RunResult:
        start = time.time()
        try:
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
        finally:
            # A run removes what it made on every path, not only when stopped: a build
            # killed by its timeout, or whose log could not be written, leaves its working
            # container too. Only now, when none of this run's builds is running.
            if self.workers:  # the loop itself failed: its builds must not outlive it
                self.builder.stop()
            self.builder.remove_leftovers()
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
                push_timeout=self.options.push_timeout, push_stall=self.options.push_stall,
                containerfile=build.containerfile, tag=build.tag,
            )
            self.results[key] = replace(self.results[key], status=Status.BUILDING,
                                        start=time.time())
            self.on_event(StatusChanged(key, Status.BUILDING))
            worker = threading.Thread(target=self.worker.build,
                                      args=(key, job, self.results[key]),
                                      name=f"build {key}", daemon=True)
            self.workers[key] = worker
            worker.start()

    def _fits(self, needs: Mapping[str, float]) -> bool:
        for slot, amount in needs.items():
            used = sum(held.get(slot, 0.0) for held in self.holding.values())
            if used + amount > self.options.capacity.get(slot, 0.0):
                return False
        return True

    def _handle(self, message: Message) -> None:
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
                                            result.log_tail, result.log))
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
            self.on_event(StatusChanged(key, result.status, result.message, result.log_tail,
                                        result.log))
            if result.status in (Status.FAILED, Status.PUSH_FAILED) and self.options.fail_fast:
                self._cancel("fail-fast")
            self._join_ready()

    def _cancel(self, reason: str) -> None:
        self.stopped_by = reason
        self.cancelled.set()
        self.builder.stop()

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
            worker = threading.Thread(target=self.worker.join,
                                      args=(image_key, {k: self.results[k] for k in keys}),
                                      name=f"list {image_key}", daemon=True)
            self.workers[image_key] = worker
            worker.start()

    def _finish(self, key: str, status: Status, message: str,
                log_tail: tuple[str, ...] = ()) -> None:
        self.results[key] = replace(self.results[key], status=status, message=message,
                                    log_tail=log_tail)
        self.on_event(StatusChanged(key, status, message, log_tail, self.results[key].log))

    def _write_log(self, key: str, lines: Sequence[str]) -> None:
        """Best effort: the lines are also the image's message and log tail."""
        path = Path(self.results[key].log)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\n" for line in lines))
        except OSError:
            pass


def _amount(value: float) -> str:
    return f"{value:g}"
