"""Issue 37 item 4: evidence the scan missed. `.egg-info` installs, a library named without
a version judged by its SONAME as its versioned twin is, a CUDA major in the middle of a
wheel's name, libraries on their own numbering never read as a CUDA release, and one
ROCm install-root pattern."""

from __future__ import annotations

from pathlib import Path

import pytest

from aipcc_build.toolkit.components import built_for
from aipcc_build.toolkit.spellings import ROCM_INSTALL
from aipcc_build.validate.detect import LayerDetector
from aipcc_build.validate.results import OK, VIOLATION, Expectation
from tests.support.elf import dynamic_elf
from tests.support.layers import member

from .test_vendored import SITE, findings

CUDA128 = Expectation("cuda", "12.8.1")
CUDA13 = Expectation("cuda", "13.0.2")
ROCM64 = Expectation("rocm", "6.4.1")


def releases(tmp_path: Path, members: list) -> set[tuple[str, str, str | None]]:
    found = findings(tmp_path, members, CUDA128)
    return {(f.path.removeprefix(f"/{SITE}/"), f.toolkit, f.version) for f in found.values()}


@pytest.mark.parametrize(("name", "toolkit", "release"), [
    ("cupy_cuda12x-13.4.0-py3.11.egg-info/PKG-INFO", "cuda", "12"),  # a directory
    ("torch-2.7.0+cu126-py3.11.egg-info", "cuda", "12.6"),  # distutils' single file
    ("jax_rocm7_plugin-0.6.0-py3.11-linux-x86_64.egg-info/PKG-INFO", "rocm", "7"),
    ("nvidia_cuda_runtime_cu12-12.8.90-py3.11.egg-info/PKG-INFO", "cuda", None),
])
def test_egg_info_installs_are_installed_distributions(name: str, toolkit: str,
                                                       release: str | None) -> None:
    detector = LayerDetector()
    detector.visit(f"/{SITE}/{name}", "0", 10)
    [evidence] = detector.finish()[0]
    assert evidence.kind == "dist-info" and evidence.toolkit == toolkit
    assert evidence.release == release
    assert evidence.path == f"/{SITE}/{name.split('/')[0]}"


def test_an_egg_info_of_another_release_fails_the_image(tmp_path: Path) -> None:
    found = findings(tmp_path, [member(f"{SITE}/torch-2.7.0+cu126-py3.11.egg-info",
                                       b"Name: torch\n")], CUDA13)
    assert [f.status for f in found.values()] == [VIOLATION]


@pytest.mark.parametrize(("name", "base", "build"), [
    ("tensorrt-cu12-bindings", "tensorrt", "12"), ("tensorrt-cu12-libs", "tensorrt", "12"),
    ("tensorrt-cu13", "tensorrt", "13"), ("foo-cu126-extras", "foo", "12.6"),
    ("jax-cuda12-plugin", "jax", "12"), ("tensorrt", "tensorrt", None),
    ("nvidia-cufile", "nvidia-cufile", None),
])
def test_a_cuda_major_inside_a_name_is_read(name: str, base: str, build: str | None) -> None:
    assert built_for(name) == (base, build)


def test_split_cuda_packages_are_judged_by_the_major_they_carry(tmp_path: Path) -> None:
    members = [member(f"{SITE}/tensorrt_cu12_bindings-10.9.0.34.dist-info/METADATA", b"x"),
               member(f"{SITE}/tensorrt_cu12_libs-10.9.0.34.dist-info/METADATA", b"x")]
    assert {f.status for f in findings(tmp_path, members, CUDA128).values()} == {OK}
    assert {f.status for f in findings(tmp_path, members, CUDA13).values()} == {VIOLATION}


@pytest.mark.parametrize("expected", [ROCM64, Expectation("rocm", "7.0.2")])
def test_a_runtime_named_without_a_version_is_judged_as_its_versioned_twin(
        tmp_path: Path, expected: Expectation) -> None:
    """A wheel bundling ROCm 7's HIP runtime as libamdhip64.so: its SONAME says 7."""
    elf = dynamic_elf(b"libamdhip64.so.7", (b"libhsa-runtime64.so.1",))
    bare = findings(tmp_path, [member(f"{SITE}/foo/lib/libamdhip64.so", elf)], expected)
    twin = findings(tmp_path, [member(f"{SITE}/foo/lib/libamdhip64.so.7", elf)], expected)
    [named_bare], [named_twin] = bare.values(), twin.values()
    assert (named_bare.status, named_bare.version) == (named_twin.status, named_twin.version)
    assert named_bare.status == (VIOLATION if expected == ROCM64 else OK)
    assert "its SONAME is libamdhip64.so.7" in named_bare.reason


def test_a_cuda_library_named_without_a_version_is_read_by_its_soname(
        tmp_path: Path) -> None:
    elf = dynamic_elf(b"libcudart.so.12")
    bare = findings(tmp_path, [member(f"{SITE}/foo.libs/libcudart-0badc0de.so", elf)],
                    CUDA13)
    [finding] = bare.values()
    assert finding.status == VIOLATION and finding.version == "12"
    cublas = findings(tmp_path, [member(f"{SITE}/bar/lib/libcublas.so",
                                        dynamic_elf(b"libcublas.so.13"))], CUDA13)
    assert [(f.status, f.version) for f in cublas.values()] == [(OK, "13")]


def test_a_soname_of_another_library_or_none_adds_nothing(tmp_path: Path) -> None:
    for elf in (dynamic_elf(b"libsomething.so.7"), b"not an ELF file"):
        found = findings(tmp_path, [member(f"{SITE}/foo/lib/libamdhip64.so", elf)], ROCM64)
        assert list(found.values()) == []


@pytest.mark.parametrize("name", [
    "cusparselt/lib/libcusparseLt.so.0", "torch/lib/libcudnn.so.9", "cudss/lib/libcudss.so.0",
    "torch/lib/libnccl.so.2"])
def test_a_library_on_its_own_numbering_is_never_a_cuda_release(tmp_path: Path,
                                                                  name: str) -> None:
    """PyTorch 2.7's exact pins install cuSPARSELt 0.6 as cusparselt/lib/libcusparseLt.so.0:
    "CUDA 0" was a false failure."""
    [finding] = findings(tmp_path, [member(f"{SITE}/{name}", b"\x7fELF")], CUDA128).values()
    assert finding.status != VIOLATION, finding.line()
    assert "numbered on its own" in finding.reason


def test_the_rocm_install_root_is_one_pattern() -> None:
    assert ROCM_INSTALL.match("/opt/rocm-6.4.1/lib").group(1) == "6.4.1"  # type: ignore[union-attr]
    assert ROCM_INSTALL.match("/opt/rocm-6.4.1")
    assert not ROCM_INSTALL.match("/opt/rocm-6.4/lib")
    assert not ROCM_INSTALL.match("/opt/rocm-6.4.1x/lib")
    detector = LayerDetector()
    for path in ("/opt/rocm-6.4.1/lib/libfoo.so", "/opt/rocm-6.4/lib/libfoo.so"):
        detector.visit(path, "0", 0)
    assert [e.path for e in detector.finish()[0]] == ["/opt/rocm-6.4.1"]
