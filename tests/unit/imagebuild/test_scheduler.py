"""The scheduling logic with a recording fake runner: no buildah, no sleeps beyond ~0.1 s."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

from aipcc_build.errors import CheckFailed, InputError
from aipcc_build.imagebuild import build_report
from aipcc_build.imagebuild.builder import BuildJob, BuildOutcome
from aipcc_build.imagebuild.outcomes import (
    Event,
    Retrying,
    RunResult,
    Status,
    StatusChanged,
    ValidationOutcome,
)
from aipcc_build.imagebuild.preflight import check_eol, parse_capacity
from aipcc_build.imagebuild.schedule_options import ScheduleOptions
from aipcc_build.imagebuild.scheduler import priorities, run
from aipcc_build.matrix import ImageSpec
from aipcc_build.plan import make_plan
from aipcc_build.report.junit import write_junit
from tests.support.fake_builder import FakeBuilder, image


def schedule(images: list[ImageSpec], runner: FakeBuilder, tmp_path: Path,
             stop: Optional[threading.Event] = None, validate=None,
             **options: object) -> tuple[RunResult, list[Event]]:
    events: list[Event] = []
    defaults: dict[str, object] = {"jobs": 4, "retry_delay": 0.01}
    opts = ScheduleOptions(log_dir=str(tmp_path / "logs"), **{**defaults, **options})
    result = run(make_plan(images), opts, runner, events.append, stop or threading.Event(),
                 validate=validate)
    return result, events


def statuses(result: RunResult) -> dict[str, str]:
    return {r.image.key: r.status.value for r in result.images}


def test_independent_builds_overlap_up_to_jobs(tmp_path: Path) -> None:
    runner = FakeBuilder(durations={f"base/i{n}": 0.1 for n in range(6)})
    result, _ = schedule([image(f"i{n}") for n in range(6)], runner, tmp_path, jobs=3)
    assert result.ok
    assert runner.max_running == 3


def test_child_starts_after_parent_from_its_image_id(tmp_path: Path) -> None:
    runner = FakeBuilder()
    result, _ = schedule([image("a", "devel", from_kind="base"), image("a")], runner,
                         tmp_path)
    assert result.ok
    assert runner.intervals["base/a"][1] <= runner.intervals["devel/a"][0]
    assert runner.jobs["devel/a"].from_image == "id-base/a"
    assert runner.jobs["base/a"].from_image is None


def test_failure_skips_dependents_and_others_go_on(tmp_path: Path) -> None:
    runner = FakeBuilder(fail={"base/a"})
    images = [image("a"), image("a", "devel", "base"), image("a", "app", "devel"), image("b")]
    result, events = schedule(images, runner, tmp_path)
    assert statuses(result) == {"base/a": "failed", "devel/a": "skipped",
                                "app/a": "skipped", "base/b": "ok"}
    failed = next(r for r in result.images if r.image.key == "base/a")
    assert failed.log_tail[-1] == "STEP 1/1: RUN make"
    assert "STEP 1/1: RUN make" in Path(failed.log).read_text()
    assert not result.ok
    assert any(isinstance(e, StatusChanged) and e.status is Status.SKIPPED
               and e.message == "base/a failed" for e in events)


def test_fail_fast_cancels_running_and_queued(tmp_path: Path) -> None:
    runner = FakeBuilder(fail={"base/a"}, durations={"base/a": 0.01, "base/b": 5,
                                                    "base/c": 5})
    images = [image("a"), image("b"), image("c")]
    started = time.monotonic()
    result, _ = schedule(images, runner, tmp_path, jobs=2, fail_fast=True)
    assert time.monotonic() - started < 2
    assert statuses(result) == {"base/a": "failed", "base/b": "cancelled",
                                "base/c": "cancelled"}
    assert result.stopped_by == "fail-fast"
    assert runner.leftovers_removed
    assert "base/c" not in runner.build_calls  # never started


def test_interrupt_stops_everything_and_reports(tmp_path: Path) -> None:
    runner = FakeBuilder(durations={"base/a": 5, "base/b": 5})
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    result, _ = schedule([image("a"), image("b"), image("c")], runner, tmp_path, jobs=2,
                         stop=stop)
    assert result.stopped_by == "interrupt"
    assert set(statuses(result).values()) == {"cancelled"}
    assert runner.leftovers_removed


def test_priority_is_the_longest_remaining_path(tmp_path: Path) -> None:
    images = [image("short"), image("long"), image("long", "devel", "base"),
              image("long", "app", "devel")]
    plan = make_plan(images)
    assert priorities(plan, {}) == {"base/short": 1, "base/long": 3, "devel/long": 2,
                                    "app/long": 1}
    runner = FakeBuilder()
    schedule(images, runner, tmp_path, jobs=1)
    assert min(runner.intervals, key=lambda k: runner.intervals[k][0]) == "base/long"


def test_history_durations_order_the_builds(tmp_path: Path) -> None:
    images = [image("a"), image("b"), image("c")]
    assert priorities(make_plan(images), {"base/b": 30, "base/c": 10}) == {
        "base/a": 20, "base/b": 30, "base/c": 10}  # a new image counts as the mean
    runner = FakeBuilder()
    schedule(images, runner, tmp_path, jobs=1, history={"base/b": 30, "base/c": 10})
    assert sorted(runner.intervals, key=lambda k: runner.intervals[k][0]) == \
        ["base/b", "base/a", "base/c"]


def test_read_history_keeps_successful_durations(tmp_path: Path) -> None:
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({"schema": 1, "images": [
        {"key": "base/a", "status": "ok", "duration": 20.0, "build_duration": 12.5},
        {"key": "base/b", "status": "failed", "duration": 1.0, "build_duration": 1.0},
    ]}))
    assert read_history(str(report)) == {"base/a": 12.5}
    report.write_text("{}")
    with pytest.raises(InputError, match="schema 1"):
        read_history(str(report))


def read_history(path: str) -> dict[str, float]:
    return build_report.durations(build_report.read(path, field="history"))


def test_resource_slots_limit_concurrency(tmp_path: Path) -> None:
    images = [image(f"i{n}", resources={"cpu": 2, "memory": 4 * 2**30}) for n in range(4)]
    runner = FakeBuilder(durations={i.key: 0.1 for i in images})
    result, _ = schedule(images, runner, tmp_path, jobs=4,
                         capacity={"cpu": 4, "memory": 32 * 2**30})
    assert result.ok
    assert runner.max_running == 2


def test_builds_without_resources_still_run_beside_heavy_ones(tmp_path: Path) -> None:
    images = [image("heavy", resources={"gpu": 1}), image("heavy2", resources={"gpu": 1}),
              image("light")]
    runner = FakeBuilder(durations={i.key: 0.1 for i in images})
    result, _ = schedule(images, runner, tmp_path, jobs=4, capacity={"gpu": 1})
    assert result.ok
    assert runner.max_running == 2  # one gpu build and the light one


def test_a_slot_nobody_provides_fails_at_once(tmp_path: Path) -> None:
    images = [image("a", resources={"gpu": 1}), image("a", "devel", "base"), image("b")]
    runner = FakeBuilder()
    result, _ = schedule(images, runner, tmp_path, capacity={"cpu": 2, "gpu": 0})
    assert statuses(result) == {"base/a": "failed", "devel/a": "skipped", "base/b": "ok"}
    failed = result.images[0]
    # The core names the capacity, not the option (issue 10): the slot and its fix.
    assert "gpu" in failed.message and "capacity: gpu=N" in failed.message
    assert "base/a" not in runner.build_calls
    assert "needs gpu=1" in Path(failed.log).read_text()


def test_more_than_the_capacity_fails_at_once(tmp_path: Path) -> None:
    result, _ = schedule([image("a", resources={"cpu": 16})], FakeBuilder(), tmp_path,
                         capacity={"cpu": 8})
    assert result.images[0].status is Status.FAILED
    assert "needs cpu=16 but the capacity is cpu=8" in result.images[0].message


def test_transient_errors_are_retried_with_backoff(tmp_path: Path) -> None:
    runner = FakeBuilder(transient_failures={"base/a": 1})
    result, events = schedule([image("a")], runner, tmp_path, retries=1)
    assert result.ok
    assert result.images[0].retries == 1
    assert [e.attempt for e in events if isinstance(e, Retrying)] == [2]


def test_retries_run_out(tmp_path: Path) -> None:
    runner = FakeBuilder(transient_failures={"base/a": 5})
    result, _ = schedule([image("a")], runner, tmp_path, retries=2)
    assert result.images[0].status is Status.FAILED
    assert runner.build_calls["base/a"] == 3


def test_a_failing_run_step_is_not_retried(tmp_path: Path) -> None:
    runner = FakeBuilder(fail={"base/a"})
    result, _ = schedule([image("a")], runner, tmp_path, retries=3)
    assert runner.build_calls["base/a"] == 1
    assert result.images[0].retries == 0


def test_push_retries_then_push_failed_while_the_rest_go_on(tmp_path: Path) -> None:
    runner = FakeBuilder(push_failures={"base/a": 9, "base/b": 1})
    result, _ = schedule([image("a"), image("b"), image("c")], runner, tmp_path, push=True,
                         retries=1)
    assert statuses(result) == {"base/a": "push-failed", "base/b": "ok", "base/c": "ok"}
    failed = result.images[0]
    assert failed.message.startswith("push to reg.example/base/a:1.0-dev failed after 2")
    assert failed.image_id == "id-base/a" and failed.digest == ""
    assert result.images[1].digest == "sha256:base/b" and result.images[1].retries == 1


def test_a_push_the_registry_refuses_is_not_retried(tmp_path: Path) -> None:
    """Only what tools.retry's table calls transient is tried again: a refused login fails
    at once (every push failure used to be retried)."""
    runner = FakeBuilder(push_denied={"base/a"}, push_failures={"base/b": 1})
    result, _ = schedule([image("a"), image("b")], runner, tmp_path, push=True, retries=3)
    assert statuses(result) == {"base/a": "push-failed", "base/b": "ok"}
    assert runner.push_attempts == {"base/a": 1, "base/b": 2}


HYGIENE = ("warning: setuid (layer) at /usr/local/bin/helper [layer sha256:0123456789ab]: "
           "setuid: set-user-ID file (mode 4755)")


def test_validation_runs_before_push_and_its_failure_blocks_it(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def validate(spec: ImageSpec, image_id: str) -> ValidationOutcome:
        seen.append((spec.key, image_id))
        if spec.name == "bad":
            return ValidationOutcome(ok=False, message="found cuda 12.9",
                                     toolkits={"cuda": ["12.9.79"]})
        return ValidationOutcome(ok=True, toolkits={"cuda": ["12.8.90"]},
                                 warnings=(HYGIENE,))

    runner = FakeBuilder()
    images = [image("bad"), image("bad", "devel", "base"), image("good")]
    result, events = schedule(images, runner, tmp_path, push=True, validate=validate)
    assert statuses(result) == {"base/bad": "failed", "devel/bad": "skipped",
                                "base/good": "ok"}
    assert runner.pushed == ["base/good"]
    by_key = {r.image.key: r for r in result.images}
    assert by_key["base/bad"].toolkits == {"cuda": ["12.9.79"]}
    assert by_key["base/good"].toolkits == {"cuda": ["12.8.90"]}
    assert by_key["base/bad"].message == "validation failed: found cuda 12.9"
    assert sorted(seen) == [("base/bad", "id-base/bad"), ("base/good", "id-base/good")]
    order = [e.status for e in events if isinstance(e, StatusChanged)
             and e.key == "base/good"]
    assert order == [Status.BUILDING, Status.VALIDATING, Status.PUSHING, Status.OK]
    # Warnings do not fail the image; its log and the JUnit XML carry them.
    good = by_key["base/good"]
    assert good.warnings == (HYGIENE,)
    assert f"validation warning: {HYGIENE}" in Path(good.log).read_text()
    write_junit(result, str(tmp_path / "junit.xml"))
    case = ET.parse(tmp_path / "junit.xml").getroot().find(".//testcase[@name='good']")
    assert case is not None
    assert f"validation warning: {HYGIENE}" in (case.findtext("system-out") or "")


def test_parse_capacity() -> None:
    assert parse_capacity("cpu=8,memory=32Gi,gpu=0") == {"cpu": 8, "memory": 32 * 2**30,
                                                          "gpu": 0}
    with pytest.raises(InputError, match="SLOT=AMOUNT"):
        parse_capacity("cpu")


def test_eol_is_refused_unless_allowed() -> None:
    old = image("a", eol=dt.date(2024, 1, 31))
    with pytest.raises(CheckFailed, match=r"cuda 12\.8\.1 reached end of life on 2024-01-31"):
        check_eol([old], dt.date(2025, 1, 1), allow_eol=False)
    assert check_eol([old], dt.date(2025, 1, 1), allow_eol=True)
    assert check_eol([old], dt.date(2024, 1, 31), allow_eol=False) == []


def test_validation_frees_the_build_slot_but_dependents_wait_for_it(tmp_path: Path) -> None:
    validated: dict[str, float] = {}

    def validate(spec: ImageSpec, image_id: str) -> ValidationOutcome:
        time.sleep(0.15)  # three times a fake build: b's build fits inside
        validated[spec.key] = time.monotonic()
        return ValidationOutcome(ok=True)

    runner = FakeBuilder()
    images = [image("a"), image("a", "devel", "base"), image("b")]
    result, _ = schedule(images, runner, tmp_path, jobs=1, validate=validate)
    assert all(r.status is Status.OK for r in result.images)
    # With one job, b builds while a is being validated...
    assert runner.intervals["base/b"][0] < validated["base/a"]
    # ...but a's child starts only once a passed validation.
    assert runner.intervals["devel/a"][0] >= validated["base/a"]


def test_a_parent_outside_the_plan_is_named_by_reference(tmp_path: Path) -> None:
    runner = FakeBuilder()
    parent = "reg.example/base/a:1.0-41"
    result, _ = schedule([image("a", "devel", "base")], runner, tmp_path,
                         parent_references={"devel/a": parent})
    assert statuses(result) == {"devel/a": "ok"}
    assert runner.jobs["devel/a"].from_image == parent


# ---- issue 16: a worker that raises fails its image; the run never hangs -----------------

@dataclass
class RaisingRunner(FakeBuilder):
    """Raises inside build for the keys in RAISE (a full disk, a bug in a runner)."""

    raise_on: set[str] = field(default_factory=set)

    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutcome:
        if job.image.key in self.raise_on:
            raise OSError(28, "No space left on device")
        return super().build(job, on_line)


def _run_in_thread(target: Callable[[], RunResult]) -> tuple[threading.Thread, list]:
    box: list = []
    thread = threading.Thread(target=lambda: box.append(target()), daemon=True)
    thread.start()
    return thread, box


def test_worker_exception_fails_the_image_and_the_run_ends(tmp_path: Path) -> None:
    runner = RaisingRunner(raise_on={"base/a"})
    images = [image("a"), image("a", "devel", "base"), image("b")]
    thread, box = _run_in_thread(lambda: schedule(images, runner, tmp_path)[0])
    thread.join(10)
    assert not thread.is_alive(), "the run hung after a worker raised"
    result = box[0]
    assert statuses(result) == {"base/a": "failed", "devel/a": "skipped", "base/b": "ok"}
    failed = next(r for r in result.images if r.image.key == "base/a")
    assert "No space left on device" in failed.message


def test_unwritable_log_dir_fails_every_image_and_the_run_ends(tmp_path: Path) -> None:
    (tmp_path / "logs").write_text("a file where the log directory should be")
    runner = FakeBuilder()
    images = [image("a"), image("b"), image("c", resources={"gpu": 2})]
    thread, box = _run_in_thread(
        lambda: schedule(images, runner, tmp_path, capacity={"gpu": 1})[0])
    thread.join(10)
    assert not thread.is_alive(), "the run hung on an unwritable log directory"
    result = box[0]
    assert set(statuses(result).values()) == {"failed"}
    assert all("logs" in r.message or "gpu" in r.message for r in result.images)


def test_interrupt_still_ends_a_run_after_a_worker_raised(tmp_path: Path) -> None:
    runner = RaisingRunner(raise_on={"base/a"}, durations={"base/b": 30})
    stop = threading.Event()
    thread, box = _run_in_thread(
        lambda: schedule([image("a"), image("b")], runner, tmp_path, stop=stop)[0])
    time.sleep(0.3)
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert statuses(box[0]) == {"base/a": "failed", "base/b": "cancelled"}


def test_retry_backoff_is_capped(tmp_path: Path) -> None:
    runner = FakeBuilder(push_failures={"base/a": 3})
    result, events = schedule([image("a")], runner, tmp_path, push=True, retries=3,
                              retry_delay=0.01, max_retry_delay=0.02)
    assert result.ok
    assert [e.delay for e in events if isinstance(e, Retrying)] == [0.01, 0.02, 0.02]
    assert result.images[0].retries == 3


def test_timeouts_reach_the_runner(tmp_path: Path) -> None:
    runner = FakeBuilder()
    schedule([image("a")], runner, tmp_path, build_timeout=7.0, push_timeout=3.0)
    assert (runner.jobs["base/a"].build_timeout, runner.jobs["base/a"].push_timeout) == (7, 3)
