"""Rows of the compatibility matrix: requirements, overrides, EOL relative to a fixed day."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from aipcc_build.compat.table import (
    EOL,
    EOL_SOON,
    SUPPORTED,
    BuiltImage,
    build_compat_table,
    eol_findings,
    eol_status,
    requirements,
)
from aipcc_build.errors import InputError
from aipcc_build.imagebuild import build_report
from aipcc_build.matrix import ImageSpec
from aipcc_build.toolkit.facts import ToolkitFacts
from tests.unit.compat.compat_images import TODAY, image


@pytest.mark.parametrize(("eol", "status"), [
    (None, SUPPORTED),
    (TODAY + dt.timedelta(days=91), SUPPORTED),
    (TODAY + dt.timedelta(days=90), EOL_SOON),
    (TODAY + dt.timedelta(days=1), EOL_SOON),
    (TODAY, EOL),
    (TODAY - dt.timedelta(days=1), EOL),
])
def test_eol_status_relative_to_today(eol: dt.date, status: str) -> None:
    assert eol_status(image("cuda", "12.9.1", eol=eol), TODAY, 90) == status


def test_warn_days_widens_the_window() -> None:
    cuda = image("cuda", "12.9.1", eol=TODAY + dt.timedelta(days=120))
    assert eol_status(cuda, TODAY, 90) == SUPPORTED
    assert eol_status(cuda, TODAY, 180) == EOL_SOON


def test_requirements_from_the_data_file(facts: ToolkitFacts) -> None:
    req = requirements(image("cuda", "12.9.1"), facts)
    assert (str(req.min_driver), str(req.native_driver)) == ("525.60.13", "575.57.08")
    assert "sm_121" in req.archs and "sm_103" in req.archs
    assert not req.missing_facts
    req13 = requirements(image("cuda", "13.0.2"), facts)
    assert (str(req13.min_driver), str(req13.native_driver)) == ("580", "580.95.05")
    assert "sm_70" not in req13.archs and "sm_110" in req13.archs


def test_matrix_fields_override_the_data_file(facts: ToolkitFacts) -> None:
    req = requirements(image("cuda", "12.8.1", native_driver="570.124.06",
                             gpu_archs=("8.0", "sm_90", "sm_100a")), facts)
    assert str(req.native_driver) == "570.124.06" and req.native_driver_from_matrix
    assert str(req.min_driver) == "525.60.13"  # minor-version compatibility still applies
    assert req.archs == ("sm_80", "sm_90", "sm_100a") and req.archs_from_matrix


def test_bad_matrix_arch_is_an_input_error(facts: ToolkitFacts) -> None:
    with pytest.raises(InputError, match="not a GPU architecture"):
        requirements(image("cuda", "12.8.1", gpu_archs=("hopper",)), facts)


def test_unknown_toolkit_version_warns_naming_the_missing_facts(facts: ToolkitFacts) -> None:
    table = build_compat_table([image("cuda", "12.10.0"), image("rocm", "5.7")], facts,
                               today=TODAY)
    text = "\n".join(table.warnings)
    assert "driver shipped with CUDA 12.10.0" in text
    assert "gfx targets of ROCm 5.7" in text and "supported OS releases of ROCm 5.7" in text
    row = next(r for r in table.rows if r.version == "12.10.0")
    assert str(row.requirements.min_driver) == "525.60.13"  # the major's floor still holds


def test_rocm_on_an_os_release_amd_does_not_list(facts: ToolkitFacts) -> None:
    table = build_compat_table([image("rocm", "6.3.4", os="rhel9.6"),
                                image("rocm", "6.4.1", os="ubi9")], facts, today=TODAY)
    assert len(table.warnings) == 1
    assert "RHEL 9.6" in table.warnings[0] and "6.3" in table.warnings[0]


def test_rows_grouped_by_accelerator_newest_first(facts: ToolkitFacts) -> None:
    table = build_compat_table(
        [image("cpu", None), image("cuda", "12.9.1"), image("rocm", "6.3.4"),
         image("cuda", "12.10.0"), image("cuda", "13.0.2"), image("rocm", "6.4.1")],
        facts, today=TODAY)
    assert [(r.accelerator, r.version) for r in table.rows] == [
        ("cuda", "13.0.2"), ("cuda", "12.10.0"), ("cuda", "12.9.1"),
        ("rocm", "6.4.1"), ("rocm", "6.3.4"), ("cpu", None)]


def test_eol_findings(facts: ToolkitFacts, images: list[ImageSpec]) -> None:
    table = build_compat_table(images, facts, today=TODAY)
    found = {(r.version, r.eol_status, r.days_to_eol) for r in eol_findings(table)}
    assert found == {("12.8.1", EOL_SOON, 44), ("12.6.3", EOL, -63)}


def test_a_build_gives_its_reference_digest_and_platforms(facts: ToolkitFacts) -> None:
    built = {"builder/cuda-12.9-ubi9": BuiltImage("reg.example/ns/b:2.0-7", "sha256:ab",
                                                  ("linux/amd64",))}
    table = build_compat_table([image("cuda", "12.9.1"), image("cuda", "12.8.1")], facts,
                               today=TODAY, built=built)
    assert [(r.reference, r.digest, r.platforms) for r in table.rows][0] == (
        "reg.example/ns/b:2.0-7", "sha256:ab", ("linux/amd64",))
    assert table.rows[1].digest is None


@pytest.mark.parametrize("content", ["not json", "[]", '{"images": [{"name": "x"}]}'])
def test_bad_build_report(tmp_path: Path, content: str) -> None:
    report = tmp_path / "r.json"
    report.write_text(content)
    with pytest.raises(InputError) as err:
        load_build_report(report)
    assert err.value.file == str(report)


def load_build_report(path: Path) -> list[build_report.ReportEntry]:
    return build_report.read(str(path))
