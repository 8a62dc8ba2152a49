"""The scheduler's tests' stand-in for buildah: a Builder that sleeps, fails as told and
records what it was asked (test_scheduler, test_scheduler_platforms, test_worker), and the
image specs they schedule."""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from aipcc_build.imagebuild.builder import BuildJob, BuildOutcome, PushOutcome
from aipcc_build.matrix import ImageSpec, ToolkitVersion


def image(name: str, kind: str = "base", from_kind: Optional[str] = None,
          resources: Optional[dict[str, float]] = None, eol: Optional[dt.date] = None,
          ) -> ImageSpec:
    return ImageSpec(
        name=name, kind=kind, accelerator="cuda", version="12.8.1", os="ubi9", os_from="x",
        variant="cuda-ubi9", repository=f"reg.example/{kind}/{name}", tag="1.0-dev",
        template="t.j2", containerfile=f"/nowhere/{kind}/{name}/Containerfile",
        from_kind=from_kind, resources=resources or {},
        toolkit=ToolkitVersion("12.8.1", eol=eol),
    )


@dataclass
class FakeBuilder:
    """Sleeps DURATIONS[key] (0.05 s by default); fails as told; records what happened."""

    durations: dict[str, float] = field(default_factory=dict)
    fail: set[str] = field(default_factory=set)
    transient_failures: dict[str, int] = field(default_factory=dict)  # key -> times
    push_failures: dict[str, int] = field(default_factory=dict)
    push_denied: set[str] = field(default_factory=set)
    push_attempts: dict[str, int] = field(default_factory=dict)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    jobs: dict[str, BuildJob] = field(default_factory=dict)
    pushed: list[str] = field(default_factory=list)
    build_calls: dict[str, int] = field(default_factory=dict)
    running: int = 0
    max_running: int = 0
    stopped: threading.Event = field(default_factory=threading.Event)
    leftovers_removed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutcome:
        key = f"{job.image.key}@{job.platform}" if job.image.multi_platform else job.image.key
        with self.lock:
            self.build_calls[key] = self.build_calls.get(key, 0) + 1
            self.jobs[key] = job
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        start = time.monotonic()
        on_line("STEP 1/1: RUN make")
        interrupted = self.stopped.wait(self.durations.get(key, 0.05))
        with self.lock:
            self.running -= 1
            self.intervals[key] = (start, time.monotonic())
        if interrupted:
            return BuildOutcome(ok=False, stopped=True, error="terminated")
        if self.transient_failures.get(key, 0) > 0:
            self.transient_failures[key] -= 1
            return BuildOutcome(ok=False, transient=True, error="connection refused")
        if key in self.fail:
            return BuildOutcome(ok=False, error='building at STEP "RUN false": exit 1')
        return BuildOutcome(ok=True, image_id=f"id-{key}")

    def push(self, job: BuildJob, image_id: str, tls_verify: bool,
             on_line: Callable[[str], None]) -> PushOutcome:
        key = job.image.key
        self.push_attempts[key] = self.push_attempts.get(key, 0) + 1
        if key in self.push_denied:
            return PushOutcome(ok=False, error="unauthorized: authentication required")
        if self.push_failures.get(key, 0) > 0:
            self.push_failures[key] -= 1
            return PushOutcome(ok=False, error="connection refused", transient=True)
        self.pushed.append(key)
        return PushOutcome(ok=True, digest=f"sha256:{key}")

    def stop(self) -> None:
        self.stopped.set()

    def remove_leftovers(self) -> list[str]:
        self.leftovers_removed = True
        return []
