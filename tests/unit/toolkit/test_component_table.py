"""The CUDA component table: every release from 12.0.0, spot values from NVIDIA's manifests."""

from __future__ import annotations

from typing import Optional

import pytest

from aipcc_build.toolkit.components import (
    UnknownRelease,
    known_releases,
    knows_release,
    release_components,
    resolve,
    rpm_versions,
    table,
    wheel_requirement,
)
from aipcc_build.validate.results import Evidence

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


def test_every_entry_names_a_known_source() -> None:
    import json
    from importlib import resources

    table = resources.files("aipcc_build").joinpath("data/cuda-components.json")
    data = json.loads(table.read_text())
    assert data["schema"] == 2
    for entry in data["releases"]:
        assert entry["sources"] and set(entry["sources"]) <= set(data["sources"]), entry["release"]
    for entry in data["components"]:
        assert set(entry["sources"]) <= set(data["sources"])


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
