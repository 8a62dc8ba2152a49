"""The validator's verdict at build, written into the build report and read back bound to
the digest the report records; promote attests it instead of validating again, and runs
the validator only on an image whose report has no verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipcc_build.errors import CheckFailed, InputError
from aipcc_build.imagebuild import build_report
from aipcc_build.imagebuild.outcomes import ImageResult, RunResult, Status
from aipcc_build.publish.release_signing import judge_promoted
from aipcc_build.publish.transfer import Copy
from aipcc_build.validate.results import Expectation, Finding, ImageVerdict
from tests.unit.compat.compat_images import image

DIGEST = "sha256:" + "a" * 64
FINDING = Finding("ok", "package", "/usr/lib/x", "found", toolkit="cuda", version="12.9",
                  component="cudart", component_version="12.9.79",
                  layer_digest="sha256:" + "1" * 64, distribution="nvidia-cuda-runtime")
VIOLATION = Finding("violation", "package", "/usr/lib/y", "CUDA 12.8 in a cuda 12.9 image",
                    toolkit="cuda", version="12.8")


def written(tmp_path: Path, *findings: Finding) -> Path:
    verdict = ImageVerdict(ref="containers-storage:i", platform="linux/amd64",
                           expected=Expectation("cuda", "12.9.1", "cuda-ubi9", "matrix"),
                           toolkits={"cuda": ("12.9",)}, findings=findings, layers=3)
    result = RunResult(images=(
        ImageResult(image("cuda", "12.9.1"), Status.OK, "log", image_id="i", digest=DIGEST,
                    toolkits={}, verdicts=(verdict,)),), start=0.0, end=1.0)
    path = tmp_path / "report.json"
    build_report.write(result, "42", str(path))
    return path


def test_the_verdict_round_trips_bound_to_the_reported_digest(tmp_path: Path) -> None:
    [entry] = build_report.read_release(written(tmp_path, FINDING)).images
    assert entry.verdicts is not None
    [verdict] = entry.verdicts
    assert verdict.digest == DIGEST and verdict.ok and verdict.findings == (FINDING,)
    assert verdict.expected == Expectation("cuda", "12.9.1", "cuda-ubi9", "matrix")
    assert verdict.toolkits == {"cuda": ("12.9",)} and verdict.layers == 3


def test_a_verdict_that_contradicts_its_findings_is_refused(tmp_path: Path) -> None:
    path = written(tmp_path, VIOLATION)
    data = json.loads(path.read_text())
    data["images"][0]["verdict"]["verdict"] = "ok"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as raised:
        build_report.read_release(path)
    assert raised.value.field == "images[0].verdict"


@pytest.mark.parametrize("record", [[], {"platform": "x"}, {
    "platform": "x", "verdict": "ok", "expected": None, "toolkits": {}, "layers": 1,
    "findings": [{"status": 1}]}])
def test_a_malformed_verdict_record_is_refused_naming_its_field(
        tmp_path: Path, record: object) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"images": [{"key": "builder/x", "status": "ok",
                                            "digest": DIGEST, "verdict": record}]}))
    with pytest.raises(InputError) as raised:
        build_report.read_release(path)
    assert raised.value.field == "images[0].verdict"


def copies() -> list[Copy]:
    return [Copy("devel/cuda", f"reg/build/cuda@{DIGEST}", "rel/cuda:3.0-42", DIGEST)]


def never(ref: str) -> list[ImageVerdict]:
    raise AssertionError(f"the validator ran on {ref}")


def test_promote_attests_the_reported_verdict_without_validating_again(
        tmp_path: Path) -> None:
    [entry] = build_report.read_release(written(tmp_path, FINDING)).images
    assert entry.verdicts is not None
    verdicts = judge_promoted(copies(), tls_verify=False, validator=never,
                              judged={"devel/cuda": entry.verdicts})
    assert verdicts(f"docker://reg/build/cuda@{DIGEST}") == entry.verdicts


def test_a_reported_failed_verdict_is_refused_without_validating_again(
        tmp_path: Path) -> None:
    [entry] = build_report.read_release(written(tmp_path, VIOLATION)).images
    assert entry.verdicts is not None
    with pytest.raises(CheckFailed, match="does not pass.*failed"):
        judge_promoted(copies(), tls_verify=False, validator=never,
                       judged={"devel/cuda": entry.verdicts})


def test_an_image_the_report_has_no_verdict_of_is_validated(tmp_path: Path) -> None:
    ran: list[str] = []

    def validator(ref: str) -> list[ImageVerdict]:
        ran.append(ref)
        return [ImageVerdict(ref=ref, platform="linux/amd64", digest=DIGEST)]

    judge_promoted(copies(), tls_verify=False, validator=validator, judged={})
    assert ran == [f"docker://reg/build/cuda@{DIGEST}"]
