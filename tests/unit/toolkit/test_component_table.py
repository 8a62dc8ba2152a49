"""The CUDA component table: every release from 12.0.0, spot values from NVIDIA's manifests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from aipcc_build.toolkit.components import (
    EXACT,
    OWN_SCHEME,
    RELEASE_NUMBERED,
    UnknownRelease,
    built_for,
    known_releases,
    knows_release,
    library_component,
    release_components,
    resolve,
    rpm_versions,
    scheme,
    table,
    wheel_requirement,
)
from aipcc_build.validate.results import Evidence
from tests.support.project import REPO

TABLE = REPO / "aipcc_build" / "data" / "cuda-components.json"

# Every CUDA release from 12.0.0 to the newest NVIDIA had published by 2026-11 (no 12.7, no 13.4.0).
RELEASES = [
    "12.0.0", "12.0.1", "12.1.0", "12.1.1", "12.2.0", "12.2.1", "12.2.2",
    "12.3.0", "12.3.1", "12.3.2", "12.4.0", "12.4.1", "12.5.0", "12.5.1",
    "12.6.0", "12.6.1", "12.6.2", "12.6.3", "12.8.0", "12.8.1", "12.8.2",
    "12.9.0", "12.9.1", "12.9.2", "13.0.0", "13.0.1", "13.0.2", "13.0.3",
    "13.1.0", "13.1.1", "13.1.2", "13.2.0", "13.2.1", "13.2.2", "13.3.0", "13.3.1",
    "13.4.1", "13.4.2", "13.4.3", "13.5.0",
]


def releases(component: str, version: str) -> Optional[tuple[str, ...]]:
    return resolve(Evidence("dist-info", "/x", "cuda", component, version))


def test_every_release_from_12_0_0_is_listed() -> None:
    assert [r for r in known_releases() if r >= "12"] == RELEASES
    for release in RELEASES:
        versions = release_components(release)
        for component in ("cuda-runtime", "cuda-nvrtc", "cuda-cupti", "nvtx", "nvjitlink",
                          "cuda-nvcc", "cublas", "cufft", "curand", "cusolver", "cusparse", "npp"):
            assert versions.get(component), (release, component)
        major_minor = release.rsplit(".", 1)[0]
        for component in ("cuda-runtime", "cuda-nvrtc", "cuda-cupti", "nvtx", "nvjitlink"):
            assert versions[component].startswith(major_minor + "."), (release, component)
        assert knows_release(major_minor) and knows_release(release)


def test_the_table_is_what_its_generator_writes_from_its_pins(tmp_path: Path) -> None:
    """Offline drift check: the committed file's derived parts follow from its pins, and
    a hand edit is caught."""
    generator = [sys.executable, str(REPO / "scripts" / "gen-cuda-components"), "--check"]
    done = subprocess.run(generator, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(TABLE.read_text())
    assert data["generated"]["by"].startswith("scripts/gen-cuda-components")
    assert "cuda-toolkit" in data["generated"]["source"]
    data["release_numbered"]["cufft"] = ["12"]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data, indent=1) + "\n")
    done = subprocess.run([*generator, str(edited)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "rerun scripts/gen-cuda-components" in done.stderr


def test_components_are_classified_by_how_nvidia_numbers_them() -> None:
    assert scheme("cuda-runtime-cu12") == RELEASE_NUMBERED
    assert scheme("cuda-cccl") == RELEASE_NUMBERED  # in CUDA 12; known because generated
    assert scheme("nvjpeg-cu12") == EXACT and scheme("cufft") == EXACT
    for own in ("cudnn-cu12", "nccl-cu12", "nvshmem-cu12", "cusparselt-cu12", "nvcomp-cu12",
                "nvimgcodec-cu12", "nvjpeg2k-cu12", "nvtiff-cu12", "dali-cuda120"):
        assert scheme(own) == OWN_SCHEME, own
    assert scheme("ml-py") is None
    assert library_component("cudart") == "cuda-runtime"
    assert library_component("cudnn_adv") == "cudnn" and library_component("nccl") == "nccl"
    assert library_component("torch_cuda") is None


def test_the_cuda_build_a_name_carries() -> None:
    assert built_for("cudnn-cu12") == ("cudnn", "12")
    assert built_for("torch-cu126") == ("torch", "12.6")
    assert built_for("foo-cu120") == ("foo", "12.0")
    assert built_for("cupy-cuda12x") == ("cupy", "12")
    assert built_for("cupy-cuda117") == ("cupy", "11.7")
    assert built_for("jax-cuda12-plugin") == ("jax", "12")
    assert built_for("numpy") == ("numpy", None)


def test_versions_of_the_exact_release_the_old_table_missed() -> None:
    """cuda-cccl 12.8.90 and nvjpeg 12.3.5.92 ship with CUDA 12.8.1 (issue 21)."""
    assert releases("cuda-cccl-cu12", "12.8.90") == ("12.8",)
    assert releases("nvjpeg-cu12", "12.3.5.92") == ("12.8",)
    assert releases("nccl-cu12", "2.26.2") == ("12",)  # any NCCL fits any 12.x
    assert releases("cuda-cupti-cu12", "2025.1.1") is None  # CUPTI's own library numbering


def test_spot_values_from_the_manifests() -> None:
    v128 = release_components("12.8.1")
    assert v128["cuda-runtime"] == "12.8.90" and v128["nvtx"] == "12.8.90"
    assert v128["cuda-cupti"] == "12.8.90" and v128["cublas"] == "12.8.4.1"
    assert v128["cusparse"] == "12.5.8.93" and v128["cufile"] == "1.13.1.3"
    assert release_components("12.9.1")["cuda-runtime"] == "12.9.79"
    # PyPI's cuda-toolkit 12.5.1 repeats 12.5.0's pins; the manifest says otherwise.
    assert release_components("12.5.1")["cuda-runtime"] == "12.5.82"
    assert release_components("12.5.1")["cublas"] == "12.5.3.2"
    assert [release_components(r)["cuda-runtime"] for r in ("13.0.0", "13.0.1", "13.0.2")] == [
        "13.0.48", "13.0.88", "13.0.96"]


def test_wheel_requirements() -> None:
    assert wheel_requirement("cuda-runtime", "12.8.1") == "nvidia-cuda-runtime-cu12==12.8.90"
    assert wheel_requirement("nvtx", "12.8.1") == "nvidia-nvtx-cu12==12.8.90"
    assert wheel_requirement("cupti", "12.9.1") == "nvidia-cuda-cupti-cu12==12.9.79"
    assert wheel_requirement("cuda-runtime", "13.0.1") == "nvidia-cuda-runtime==13.0.88"
    assert wheel_requirement("cuda-runtime", "13.0.2") == "nvidia-cuda-runtime==13.0.96"
    assert wheel_requirement("cublas", "13.0.2", wildcard=True) == "nvidia-cublas==13.1.0.3.*"
    with pytest.raises(UnknownRelease, match="cufile.*12.2.2"):
        wheel_requirement("cufile", "12.2.2")  # no cufile wheel before 12.6.3


def test_rpm_versions_follow_nvidias_naming() -> None:
    assert rpm_versions("12.9.1") == {"cudart": "12.9.79-1", "cuda_libraries": "12.9.1-1"}
    assert rpm_versions("12.8.1")["cudart"] == "12.8.90-1"


def test_unknown_release_raises_naming_it() -> None:
    for release in ("12.7.0", "13.4.0", "99.1.0"):
        with pytest.raises(KeyError, match=release.replace(".", r"\.")):
            release_components(release)
    with pytest.raises(UnknownRelease, match="12.8.0, 12.8.1, 12.8.2"):
        release_components("12.8")
    with pytest.raises(UnknownRelease, match="12.7.0"):
        rpm_versions("12.7.0")
    assert not knows_release("12.7") and not knows_release("13.4.0") and not knows_release("x")


def test_resolve_places_every_version_of_the_table() -> None:
    assert releases("cusparse-cu12", "12.5.8.93") == ("12.8",)
    assert releases("cusparse", "12.5.8.93") == ("12.8",)
    assert releases("cusparse-cu13", "12.5.8.93") is None
    assert releases("npp-cu12", "12.3.1.54") == ("12.6",)
    assert releases("cuda-runtime-cu12", "12.8.90.1") == ("12.8",)  # a wheel's extra part
    assert releases("cublas", "13.10.0.20") == ("13.5",)
    assert releases("cublas", "13.4.2.4") is None  # a cuBLAS wheel of no toolkit: not 13.4
    assert releases("cublas-cu12", "12.9.7.1") == ("12.9",)  # CUDA 12 keeps the prefix rule
    for release in RELEASES:
        minor = release.rsplit(".", 1)[0]
        suffix = "-cu12" if release.startswith("12.") else ""
        for component, version in release_components(release).items():
            found = releases(component + suffix, version)
            assert found and minor in found, (release, component, version, found)
    assert table().releases >= {r.rsplit(".", 1)[0] for r in RELEASES}
