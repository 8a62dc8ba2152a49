"""One image's build -> validate -> push, driven alone: a fake builder, the messages the
worker sends to the main loop collected in a list, no scheduler."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Optional

from aipcc_build.imagebuild import outcomes
from aipcc_build.imagebuild.builder import BuildJob, ListJob, ListOutcome
from aipcc_build.imagebuild.outcomes import ImageResult, Status, ValidationOutcome
from aipcc_build.imagebuild.schedule_options import ScheduleOptions
from aipcc_build.imagebuild.worker import Message, Worker
from tests.support.fake_builder import FakeBuilder, image


def job(name: str = "a") -> BuildJob:
    return BuildJob(image=image(name), from_image=None, build_args={}, labels={},
                    layers=None, pull=None, platform=None)


def drive(builder: FakeBuilder, tmp_path: Path, validate=None,  # type: ignore[no-untyped-def]
          cancelled: Optional[threading.Event] = None,
          **options: object) -> tuple[ImageResult, list[Message]]:
    sent: list[Message] = []
    worker = Worker(builder, ScheduleOptions(log_dir=str(tmp_path), retry_delay=0.01,
                                             **options),  # type: ignore[arg-type]
                    sent.append, validate, cancelled)
    one = job()
    worker.build(one.image.key, one,
                 ImageResult(image=one.image, status=Status.BUILDING,
                             log=str(tmp_path / "a.log")))
    results = [m.result for m in sent if m.result is not None]
    assert len(results) == 1 and sent[-1].result is results[0]
    return results[0], sent


def events(sent: list[Message]) -> list[object]:
    return [m.event for m in sent if m.event is not None]


def test_build_validate_push_in_order(tmp_path: Path) -> None:
    checked: list[str] = []

    def validate(spec, image_id):  # type: ignore[no-untyped-def]
        checked.append(image_id)
        return ValidationOutcome(ok=True, toolkits={"cuda": ["12.8.90"]}, warnings=("w",))

    builder = FakeBuilder()
    result, sent = drive(builder, tmp_path, validate, push=True)
    assert result.status is Status.OK and result.digest == "sha256:base/a"
    assert checked == ["id-base/a"] and builder.pushed == ["base/a"]
    assert result.toolkits == {"cuda": ["12.8.90"]} and result.warnings == ("w",)
    statuses = [e.status for e in events(sent) if isinstance(e, outcomes.StatusChanged)]
    assert statuses == [Status.VALIDATING, Status.PUSHING]
    # The build slot is released before validating; dependents may start once validated.
    kinds = [("released" if m.released else "built" if m.built_id else None) for m in sent]
    assert kinds.index("released") < kinds.index("built")
    log = (tmp_path / "a.log").read_text()
    assert "STEP 1/1: RUN make" in log and "validation warning: w" in log
    assert any(isinstance(e, outcomes.LogLine) for e in events(sent))


def test_failed_validation_is_not_pushed(tmp_path: Path) -> None:
    builder = FakeBuilder()
    result, _ = drive(builder, tmp_path,
                      lambda spec, image_id: ValidationOutcome(ok=False, message="mixed"),
                      push=True)
    assert result.status is Status.FAILED and "validation failed: mixed" in result.message
    assert builder.pushed == []


def test_transient_build_failure_is_retried_with_the_backoff(tmp_path: Path) -> None:
    builder = FakeBuilder(transient_failures={"base/a": 2})
    result, sent = drive(builder, tmp_path, retries=2, max_retry_delay=0.015)
    assert result.status is Status.OK and result.retries == 2
    assert [(e.attempt, e.delay) for e in events(sent) if isinstance(e, outcomes.Retrying)] == \
        [(2, 0.01), (3, 0.015)]


def test_a_push_that_keeps_failing_ends_push_failed(tmp_path: Path) -> None:
    builder = FakeBuilder(push_failures={"base/a": 5})
    result, _ = drive(builder, tmp_path, push=True, retries=1)
    assert result.status is Status.PUSH_FAILED
    assert "failed after 2 attempt(s): connection refused" in result.message
    assert result.log_tail  # a failure carries the tail of its log


def test_cancelled_before_the_push_is_not_pushed(tmp_path: Path) -> None:
    cancelled = threading.Event()
    cancelled.set()
    builder = FakeBuilder()
    result, _ = drive(builder, tmp_path, cancelled=cancelled, push=True)
    assert result.status is Status.CANCELLED and builder.pushed == []


def test_a_builder_that_raises_fails_the_image_with_its_error(tmp_path: Path) -> None:
    class Broken(FakeBuilder):
        def build(self, job, on_line):  # type: ignore[no-untyped-def]
            raise RuntimeError("disk on fire")

    result, _ = drive(Broken(), tmp_path)
    assert result.status is Status.FAILED and result.message == "RuntimeError: disk on fire"


def test_list_worker_joins_and_pushes_the_platforms(tmp_path: Path) -> None:
    class Lists(FakeBuilder):
        def make_list(self, job: ListJob, on_line) -> ListOutcome:  # type: ignore[no-untyped-def]
            return ListOutcome(ok=True)

        def push_list(self, job: ListJob, tls_verify: bool,  # type: ignore[no-untyped-def]
                      on_line) -> ListOutcome:
            return ListOutcome(ok=True, digest="sha256:list",
                               instance_digests={p: f"sha256:{p}" for p in job.instances})

    sent: list[Message] = []
    worker = Worker(Lists(), ScheduleOptions(log_dir=str(tmp_path), push=True), sent.append)
    spec = image("m")
    results = {f"base/m@{p}": ImageResult(image=spec, status=Status.BUILT, log="", platform=p,
                                          image_id=f"id-{p}")
               for p in ("linux/amd64", "linux/arm64")}
    worker.join("base/m", results)
    (joined,) = [m.joined for m in sent if m.joined is not None]
    assert {k: (r.status, r.digest, r.list_digest) for k, r in joined.items()} == {
        "base/m@linux/amd64": (Status.OK, "sha256:linux/amd64", "sha256:list"),
        "base/m@linux/arm64": (Status.OK, "sha256:linux/arm64", "sha256:list"),
    }
