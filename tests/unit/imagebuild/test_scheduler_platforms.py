"""Multi-platform scheduling with a fake runner: a build per image and platform, children
FROM the parent of their own platform, a manifest list after the last platform, emulation
slots and refusal without an emulator (issue 13.2-4)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import pytest

from aipcc_build.errors import InputError
from aipcc_build.imagebuild import build_report
from aipcc_build.imagebuild.builder import ListJob, ListOutcome
from aipcc_build.imagebuild.outcomes import Status, ValidationOutcome
from aipcc_build.imagebuild.preflight import check_emulation, emulator_registered
from aipcc_build.imagebuild.schedule_options import ScheduleOptions
from aipcc_build.imagebuild.scheduler import priorities, run
from aipcc_build.matrix import ImageSpec
from aipcc_build.matrix.model import Product
from aipcc_build.matrix.platforms import EMULATION_SLOWDOWN
from aipcc_build.plan import make_plan
from aipcc_build.report import junit
from tests.support.fake_builder import FakeBuilder, image

AMD, ARM = "linux/amd64", "linux/arm64"


def multi(name: str, kind: str = "base", from_kind: str | None = None) -> ImageSpec:
    spec = image(name, kind, from_kind)
    return replace(spec, platforms=(AMD, ARM),
                   containerfiles={p: f"/nowhere/{kind}/{name}/Containerfile.{p[6:]}"
                                   for p in (AMD, ARM)})


@dataclass
class PlatformBuilder(FakeBuilder):
    """FakeBuilder with manifest lists."""

    lists: dict[str, ListJob] = field(default_factory=dict)
    list_pushes: list[str] = field(default_factory=list)

    def make_list(self, job: ListJob, on_line: Callable[[str], None]) -> ListOutcome:
        self.lists[job.image.key] = job
        return ListOutcome(ok=True)

    def push_list(self, job: ListJob, tls_verify: bool,
                  on_line: Callable[[str], None]) -> ListOutcome:
        self.list_pushes.append(job.image.key)
        return ListOutcome(ok=True, digest=f"sha256:list-{job.image.key}",
                           instance_digests={p: f"sha256:{p}" for p in job.instances})


def schedule(images: list[ImageSpec], runner: FakeBuilder, tmp_path: Path, validate=None,
             **options: object):
    opts = ScheduleOptions(log_dir=str(tmp_path / "logs"),
                           **{"jobs": 4, "retry_delay": 0.01, "capacity": {"emulation": 4},
                              **options})
    return run(make_plan(images, host=AMD), opts, runner, lambda e: None, threading.Event(),
               validate=validate)


def test_each_platform_is_a_build_and_children_use_their_own_platforms_parent(
        tmp_path: Path) -> None:
    runner = PlatformBuilder()
    result = schedule([multi("a"), multi("a", "top", "base")], runner, tmp_path, push=True)
    assert [r.key for r in result.images] == ["base/a@linux/amd64", "base/a@linux/arm64",
                                              "top/a@linux/amd64", "top/a@linux/arm64"]
    assert all(r.status is Status.OK for r in result.images), result
    for platform in (AMD, ARM):
        job = runner.jobs[f"top/a@{platform}"]
        assert job.from_image == f"id-base/a@{platform}"
        assert job.platform == platform and job.tag.endswith(f"-{platform[6:]}")
        assert job.containerfile.endswith(f"Containerfile.{platform[6:]}")
    assert runner.lists["base/a"].instances == {AMD: "id-base/a@linux/amd64",
                                                ARM: "id-base/a@linux/arm64"}
    assert sorted(runner.list_pushes) == ["base/a", "top/a"]
    arm = result.images[1]
    assert arm.list_digest == "sha256:list-base/a" and arm.digest == f"sha256:{ARM}"
    # The report: one entry per image and platform, read back as one image with instances.
    product = Product("p", "2.0", ("{version}", "latest"))
    build_report.write(replace(result, product=product), "1",
                       str(tmp_path / "report.json"))
    release = build_report.read_release(tmp_path / "report.json")
    assert release.product == product  # promote, mirror and compat take it from here
    entries = release.images
    assert [(e.key, e.digest, e.platforms) for e in entries] == [
        ("base/a", "sha256:list-base/a", (AMD, ARM)), ("top/a", "sha256:list-top/a", (AMD, ARM))]
    assert set(build_report.durations(entries)) == {r.key for r in result.images}
    junit.write_junit(result, str(tmp_path / "junit.xml"))
    assert "a [linux/arm64]" in (tmp_path / "junit.xml").read_text()


def test_a_platform_failing_validation_fails_the_image_naming_it(tmp_path: Path) -> None:
    runner = PlatformBuilder()

    def validate(spec: ImageSpec, image_id: str) -> ValidationOutcome:
        if image_id.endswith(ARM):
            return ValidationOutcome(ok=False, message="cuda 12.9 found")
        return ValidationOutcome(ok=True)

    result = schedule([multi("a"), multi("a", "top", "base")], runner, tmp_path,
                      validate=validate, push=True)
    status = {r.key: (r.status, r.message) for r in result.images}
    assert status["base/a@linux/arm64"] == (Status.FAILED,
                                            "validation failed on linux/arm64: cuda 12.9 found")
    assert status["base/a@linux/amd64"][0] is Status.SKIPPED
    assert "linux/arm64 failed" in status["base/a@linux/amd64"][1]
    assert status["top/a@linux/arm64"][0] is Status.SKIPPED
    assert runner.list_pushes == [] and not result.ok


def test_emulated_builds_hold_the_emulation_slot(tmp_path: Path) -> None:
    runner = PlatformBuilder(durations={f"base/{n}@{ARM}": 0.2 for n in "abc"})
    result = schedule([multi(n) for n in "abc"], runner, tmp_path, capacity={"emulation": 1})
    assert result.ok
    arm = sorted(runner.intervals[f"base/{n}@{ARM}"] for n in "abc")
    assert all(earlier[1] <= later[0] for earlier, later in zip(arm, arm[1:])), arm


def test_emulated_builds_without_history_count_as_slower() -> None:
    plan = make_plan([multi("a")], host=AMD)
    found = priorities(plan, {"base/x": 10.0})
    assert found == {f"base/a@{AMD}": 10.0, f"base/a@{ARM}": 10.0 * EMULATION_SLOWDOWN}
    assert priorities(plan, {f"base/a@{ARM}": 7.0})[f"base/a@{ARM}"] == 7.0


def test_a_foreign_platform_without_an_emulator_is_refused(tmp_path: Path) -> None:
    plan = make_plan([multi("a")], host=AMD)
    with pytest.raises(InputError) as caught:
        check_emulation(plan, str(tmp_path))
    message = str(caught.value)
    assert "linux/arm64" in message and "qemu-aarch64" in message
    assert "setup-emulation" in message and caught.value.exit_code == 2
    (tmp_path / "qemu-aarch64").write_text("disabled\ninterpreter /x\n")
    assert not emulator_registered(ARM, str(tmp_path))
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /x\n")
    check_emulation(plan, str(tmp_path))
