"""The validator's check of an image's constraints file: present, for the image's labels,
named by PIP_CONSTRAINT and UV_CONSTRAINT (read with the config files by the layer scan)."""

from __future__ import annotations

from pathlib import Path

from aipcc_build.image_index_settings import CONSTRAINT_VARIABLES
from aipcc_build.toolkit.constraints import CONSTRAINTS_PATH, constraints_text, target_of
from aipcc_build.validate.results import Expectation, ImageVerdict
from aipcc_build.validate.verdict import judge
from tests.support.layers import member, tar_bytes
from tests.unit.validate.test_validate_units import image, scan

LABELS = {"ai.aipcc.accelerator": "cuda", "ai.aipcc.accelerator.version": "12.8.1",
          "ai.aipcc.constraints": CONSTRAINTS_PATH}
ENV = {name: CONSTRAINTS_PATH for name in CONSTRAINT_VARIABLES}


def verdict(tmp_path: Path, files: dict[str, str], env: dict[str, str] = ENV,
            labels: dict[str, str] = LABELS) -> ImageVerdict:
    layer = scan(tmp_path, tar_bytes([member(path, text.encode())
                                      for path, text in files.items()]))
    return judge(ref="ref", image=image(env, labels), scans=[layer],
                 expect=Expectation("cuda", "12.8.1"))


def constraints(result: ImageVerdict) -> list[tuple[str, str, str]]:
    return [(f.status, f.path, f.reason) for f in result.findings
            if f.evidence == "constraints"]


def test_the_images_own_constraints_pass(tmp_path: Path) -> None:
    text = constraints_text(target_of("cuda", "12.8.1"))
    result = verdict(tmp_path, {CONSTRAINTS_PATH.lstrip("/"): text})
    assert result.ok
    assert constraints(result) == [("ok", CONSTRAINTS_PATH, "pip and uv keep to cuda 12.8")]


def test_a_missing_or_wrong_release_file_fails_the_image(tmp_path: Path) -> None:
    missing = verdict(tmp_path, {"etc/other": "x"})
    assert not missing.ok
    assert constraints(missing)[0][:2] == ("violation", CONSTRAINTS_PATH)
    assert "carries no constraints file" in constraints(missing)[0][2]
    wrong = verdict(tmp_path, {CONSTRAINTS_PATH.lstrip("/"):
                               constraints_text(target_of("cuda", "12.9.1"))})
    assert not wrong.ok
    assert constraints(wrong) == [("violation", CONSTRAINTS_PATH, "the constraints file is "
                                   "for cuda 12.9, in a cuda 12.8 image")]
    edited = verdict(tmp_path, {CONSTRAINTS_PATH.lstrip("/"): "torch==2.8.0\n"})
    assert "names no toolkit" in constraints(edited)[0][2]


def test_a_file_pip_and_uv_are_not_told_about_fails_the_image(tmp_path: Path) -> None:
    text = constraints_text(target_of("cuda", "12.8.1"))
    result = verdict(tmp_path, {CONSTRAINTS_PATH.lstrip("/"): text},
                     env={"PIP_CONSTRAINT": "/dev/null"})
    # Build constraints too: pip 26.2 passes PIP_CONSTRAINT to no build environment.
    assert {(s, p) for s, p, _ in constraints(result)} == {
        ("violation", f"config:Env/{name}") for name in CONSTRAINT_VARIABLES}


def test_an_image_without_the_label_is_not_judged(tmp_path: Path) -> None:
    # Built by other means, or rendered before images carried constraints.
    labels = {k: v for k, v in LABELS.items() if k != "ai.aipcc.constraints"}
    assert constraints(verdict(tmp_path, {"etc/other": "x"}, labels=labels)) == []


def test_an_image_of_a_matrix_without_the_label_needs_no_file(tmp_path: Path) -> None:
    # A FROM scratch image (a root file system copied in, no pip, uv or Python): the
    # renderer writes neither the file nor the label, and the validator asks for neither,
    # whatever expectation the image is judged against (issue 39).
    labels = {k: v for k, v in LABELS.items() if k != "ai.aipcc.constraints"}
    layer = scan(tmp_path, tar_bytes([member("etc/os-release", b"ID=debian\n")]))
    result = judge(ref="ref", image=image({}, labels), scans=[layer],
                   expect=Expectation("cuda", "12.8.1", source="matrix"))
    assert constraints(result) == []
