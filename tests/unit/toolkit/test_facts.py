"""The packaged data file: complete for the shipped matrix, consistent, sourced."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from aipcc_build.errors import InputError
from aipcc_build.matrix import expand, load
from aipcc_build.toolkit.facts import DriverVersion, ToolkitFacts, load_facts
from tests.support.project import REPO  # noqa: E402


def test_every_toolkit_of_the_shipped_matrix_has_facts(facts: ToolkitFacts) -> None:
    images = expand(load(REPO / "matrix" / "aipcc.yaml"))
    assert {i.accelerator for i in images} >= {"cuda", "rocm"}
    for image in images:
        if image.accelerator == "cuda":
            assert image.version is not None
            assert facts.cuda_release(image.version), image.version
            assert facts.cuda_major(image.version), image.version
            assert facts.cuda_architectures_for(image.version), image.version
        elif image.accelerator == "rocm":
            assert image.version is not None
            assert facts.rocm_release(image.version), image.version


def test_every_fact_cites_a_public_source(facts: ToolkitFacts) -> None:
    sources = facts.sources()
    assert len(sources) > 20
    for what, source in sources:
        assert source.startswith("https://"), what


def test_driver_shipped_with_each_toolkit(facts: ToolkitFacts) -> None:
    shipped = {v: str(r.driver) for v, r in facts.cuda_releases.items()}
    assert shipped["12.8.0"] == "570.86.10"
    assert shipped["12.8.1"] == "570.124.06"
    assert shipped["12.9.0"] == "575.51.03"
    assert shipped["12.9.1"] == "575.57.08"
    assert shipped["13.0.0"] == "580.65.06"
    assert shipped["13.0.2"] == "580.95.05"
    assert shipped["13.1.0"] == "590.44.01"


def test_newer_toolkits_never_ship_an_older_driver(facts: ToolkitFacts) -> None:
    releases = sorted(facts.cuda_releases.values(), key=lambda r: Version(r.version))
    drivers = [r.driver for r in releases]
    assert drivers == sorted(drivers)
    for release in releases:
        major = facts.cuda_major(release.version)
        assert major is not None and major.min_driver <= release.driver


def test_minor_version_compatibility_floors(facts: ToolkitFacts) -> None:
    assert str(facts.cuda_majors[12].min_driver) == "525.60.13"
    assert facts.cuda_majors[13].min_driver == DriverVersion.parse("580")
    assert DriverVersion.parse("580") <= DriverVersion.parse("580.65.06")


def test_architecture_changes_between_releases(facts: ToolkitFacts) -> None:
    def ccs(version: str) -> set[str]:
        archs = facts.cuda_architectures_for(version)
        assert archs is not None
        return set(archs.compute_capabilities)

    assert ccs("12.8.1") - ccs("12.6.3") == {"10.0", "10.1", "12.0"}
    assert ccs("12.9.1") - ccs("12.8.1") == {"10.3", "12.1"}
    assert {"5.0", "6.0", "6.1", "7.0", "7.2", "10.1"}.isdisjoint(ccs("13.0.0"))
    assert "11.0" in ccs("13.0.0")  # sm_101 renamed sm_110
    assert min(ccs("13.0.0"), key=Version) == "7.5"
    assert ccs("13.1.0") == ccs("13.0.0")  # an unlisted minor inherits the one before


def test_versions_sort_numerically(facts: ToolkitFacts) -> None:
    # 12.10 must not sort before 12.9, as it would as a string.
    assert facts.cuda_architectures_for("12.10.0") is facts.cuda_architectures_for("12.9.1")
    minors = [a.minor for a in facts.cuda_architectures]
    assert minors == sorted(minors, key=Version)
    assert DriverVersion.parse("575.57.08") > DriverVersion.parse("575.9.1")


@pytest.mark.parametrize(("label", "name", "arch"), [
    ("NVIDIA-H100-80GB-HBM3", "H100", "9.0"),
    ("NVIDIA-H200", "H200", "9.0"),
    ("Tesla-V100-SXM2-16GB", "V100", "7.0"),
    ("Tesla-T4", "T4", "7.5"),
    ("NVIDIA-A100-SXM4-80GB", "A100", "8.0"),
    ("NVIDIA-A10G", "A10G", "8.6"),
    ("NVIDIA-L40S", "L40S", "8.9"),
    ("NVIDIA-L4", "L4", "8.9"),
    ("NVIDIA-B200", "B200", "10.0"),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX PRO 6000 Blackwell", "12.0"),
    ("NVIDIA-GeForce-RTX-5090", "RTX 5090", "12.0"),
    ("AMD_Instinct_MI300X_OAM", "MI300X", "gfx942"),
    ("mi250x", "MI250X", "gfx90a"),
    ("MI355X", "MI355X", "gfx950"),
])
def test_gpu_product_labels(facts: ToolkitFacts, label: str, name: str, arch: str) -> None:
    gpu = facts.find_gpu(label)
    assert (gpu.name, gpu.arch) == (name, arch)


def test_gfx950_only_from_rocm_7(facts: ToolkitFacts) -> None:
    for minor, release in facts.rocm_releases.items():
        assert ("gfx950" in release.gfx_targets) == (Version(minor) >= Version("7.0"))
        assert any(os.startswith("RHEL 9.") for os in release.os_releases)


def test_gpu_names_are_unique(facts: ToolkitFacts) -> None:
    names = facts.gpu_names()
    assert len(names) == len(set(names))


def test_a_broken_data_file_names_the_field(tmp_path: Path) -> None:
    broken = tmp_path / "compat.yaml"
    broken.write_text("schema: 1\ncuda: {majors: []}\nrocm: {}\n")
    with pytest.raises(InputError, match="required key 'releases' is missing") as err:
        load_facts(broken)
    assert (err.value.file, err.value.line, err.value.field) == (str(broken), 2, "cuda.releases")


def test_a_bad_value_in_the_data_file_names_its_line_and_field(tmp_path: Path) -> None:
    # The facts are read like the matrix: by position, each value as written.
    packaged = Path(__file__).resolve().parents[3] / "aipcc_build" / "data" / "compat.yaml"
    broken = tmp_path / "compat.yaml"
    text = packaged.read_text()
    broken.write_text(text.replace("min_driver: ", "min_driver: x", 1))
    with pytest.raises(InputError, match="is not a driver version") as err:
        load_facts(broken)
    line = text[:text.index("min_driver: ")].count("\n") + 1
    assert (err.value.line, err.value.field) == (line, "cuda.majors[0].min_driver")


@pytest.mark.parametrize("matrix", sorted((REPO / "matrix").glob("*.yaml")),
                         ids=lambda path: path.name)
def test_a_shipped_matrix_gives_each_release_the_driver_nvidia_names(
        facts: ToolkitFacts, matrix: Path) -> None:
    """A matrix's native_driver overrides the data file's: in the shipped matrices it must
    be the driver NVIDIA's release notes (the data file's source) give the release. CUDA
    12.9.1 once said 12.9.0's 575.51.03, and select called 575.51.03 native for 12.9.1."""
    loaded = load(str(matrix))
    wrong = []
    for name, accelerator in loaded.accelerators.items():
        for toolkit in accelerator.versions:
            release = facts.cuda_release(toolkit.version) if name == "cuda" else None
            if toolkit.native_driver and release is not None and \
                    toolkit.native_driver != str(release.driver):
                wrong.append(f"{name} {toolkit.version}: {toolkit.native_driver}, NVIDIA "
                             f"{release.driver}")
    assert not wrong, wrong
