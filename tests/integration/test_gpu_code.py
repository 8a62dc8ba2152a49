"""The GPU code of real NVIDIA libraries from real wheels, installed into real images and
read through `aipcc-build validate`, compared with what NVIDIA's own cuobjdump (from its
PyPI wheel) lists for the same files; and the judging of the architectures an image must
run on, against those libraries."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.artifacts import wheel
from tests.support.layers import SITE, Images, Step, unzip_script
from tests.support.project import REPO

pytestmark = pytest.mark.integration

NVJPEG13 = ("nvidia-nvjpeg", "13.3.2.43", "nvidia/cu13/lib/libnvjpeg.so.13")
CURAND128 = ("nvidia-curand-cu12", "10.3.9.90", "nvidia/curand/lib/libcurand.so.10")
CUOBJDUMP = ("nvidia-cuda-cuobjdump", "13.5.37", "nvidia/cu13/bin/cuobjdump")
_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(?:cubin|ptx)$")


def extract(wheelhouse: Path, spec: tuple[str, str, str], into: Path) -> Path:
    project, version, member = spec
    with zipfile.ZipFile(wheel(wheelhouse, project, version)) as archive:
        return Path(archive.extract(member, into))


def cuobjdump_lists(tool: Path, library: Path) -> tuple[set[str], set[str]]:
    """(SASS, PTX) architectures cuobjdump lists; it names a PTX entry NAME.sm_XX.ptx,
    which is compute_XX."""
    done = subprocess.run([str(tool), "--list-elf", "--list-ptx", str(library)],
                          capture_output=True, text=True, timeout=120, check=True)
    sass, ptx = set(), set()
    for line in done.stdout.splitlines():
        match = _LISTED.match(line.strip())
        assert match, f"cuobjdump printed a line this test cannot read: {line!r}"
        if match.group(1) == "ELF":
            sass.add(match.group(2))
        else:
            ptx.add(match.group(2).replace("sm_", "compute_"))
    assert sass, f"cuobjdump lists no SASS in {library}"
    return sass, ptx


def validate(ref: str, cache: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """The exit code, the --json report and the plain lines (CI) of one validation."""
    def run(*extra: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "aipcc_build", "validate", ref, "--cache-dir", str(cache),
             *args, *extra], capture_output=True, text=True, timeout=600,
            env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "PYTHONPATH": str(REPO), **env})

    done = run("--json", env={})
    plain = run(env={"CI": "1"})
    assert done.returncode == plain.returncode, plain.stdout + plain.stderr
    return done.returncode, json.loads(done.stdout), plain.stdout


@pytest.fixture(scope="module")
def nvjpeg13(images: Images, base_image: str, wheelhouse: Path) -> str:
    """A CUDA 13 library with kernels (sm_75 and later: CUDA 13 dropped Volta)."""
    nvjpeg = wheel(wheelhouse, *NVJPEG13[:2])
    return images.build("nvjpeg13", base_image, [Step(
        add=[(nvjpeg, f"/tmp/{nvjpeg.name}")], script=unzip_script([nvjpeg.name]),
        labels={"ai.aipcc.accelerator": "cuda", "ai.aipcc.accelerator.version": "13"})])


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpu-code-cache")


def files_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    [verdict] = report["images"]
    return {f["path"]: f for f in verdict["gpu_code_files"]}


@pytest.mark.parametrize("spec, fixture", [(NVJPEG13, "nvjpeg13"), (CURAND128, "curand128")])
def test_device_code_read_from_an_image_agrees_with_cuobjdump(
        spec: tuple[str, str, str], fixture: str, request: pytest.FixtureRequest,
        wheelhouse: Path, cache: Path, tmp_path: Path) -> None:
    image = request.getfixturevalue(fixture)
    tool = extract(wheelhouse, CUOBJDUMP, tmp_path)
    tool.chmod(0o755)
    sass, ptx = cuobjdump_lists(tool, extract(wheelhouse, spec, tmp_path))
    _, report, _ = validate(f"containers-storage:{image}", cache)
    found = files_of(report)[f"{SITE}/{spec[2]}"]
    assert (set(found["sass"]), set(found["ptx"])) == (sass, ptx)
    assert found["gfx"] == [] and "fatbinaries" in found["evidence"]
    [verdict] = report["images"]
    assert set(verdict["gpu_code"]["cuda"]["sass"]) >= sass
    assert "rocm" not in verdict["gpu_code"]


def test_a_cuda13_image_expected_on_volta_fails_naming_its_library(
        nvjpeg13: str, cache: Path) -> None:
    code, report, plain = validate(f"containers-storage:{nvjpeg13}", cache,
                                   "--expect-gpu-archs", "sm_70,sm_80")
    assert code == 1
    [verdict] = report["images"]
    [violation] = [f for f in verdict["findings"] if f["status"] == "violation"]
    assert violation["path"] == f"{SITE}/{NVJPEG13[2]}" and violation["component"] == "sm_70"
    assert "none of its GPU code runs on sm_70" in violation["reason"]
    assert "SASS sm_75, sm_80" in violation["reason"]
    assert "gpu code: SASS sm_75 sm_80" in plain and "judged against sm_70, sm_80" in plain


def test_covered_by_older_sass_of_the_same_major_and_by_ptx_alone(
        nvjpeg13: str, curand128: str, cache: Path) -> None:
    code, report, _ = validate(f"containers-storage:{curand128}", cache,
                               "--expect-gpu-archs", "sm_87,sm_61,sm_130")
    assert code == 0
    runs = files_of(report)[f"{SITE}/{CURAND128[2]}"]["runs_on"]
    # sm_87 (Orin) runs sm_86 code; sm_61 sm_60 code; a later major only PTX, by JIT
    assert runs == {"sm_87": "sm_86", "sm_61": "sm_60", "sm_130": "compute_120"}
    code, report, _ = validate(f"containers-storage:{nvjpeg13}", cache,
                               "--expect-gpu-archs", "sm_88,sm_130")
    assert code == 0
    assert files_of(report)[f"{SITE}/{NVJPEG13[2]}"]["runs_on"] == {
        "sm_88": "sm_86", "sm_130": "compute_121"}


def test_a_rocm_target_is_not_judged_against_cuda_code(nvjpeg13: str, cache: Path) -> None:
    code, report, plain = validate(f"containers-storage:{nvjpeg13}", cache,
                                   "--expect-gpu-archs", "gfx942")
    assert code == 0, plain
    assert files_of(report)[f"{SITE}/{NVJPEG13[2]}"]["runs_on"] == {}


BUNDLE_TARGETS = ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", "hipv4-amdgcn-amd-amdhsa--gfx942",
                  "hipv4-amdgcn-amd-amdhsa--gfx11-generic")


def bundler() -> str:
    found = shutil.which("clang-offload-bundler-22") or shutil.which("clang-offload-bundler")
    if found is None:
        pytest.fail("clang-offload-bundler is not installed: run `make system`")
    return found


@pytest.fixture(scope="module")
def hip_library(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """A shared object whose .hip_fatbin holds what LLVM's clang-offload-bundler wrote, as
    hipcc lays it out (a page-aligned allocated section, one bundle per page boundary): a
    plain bundle and compressed ones of format versions 2 and 3; and the targets the
    bundler itself lists for them."""
    work = tmp_path_factory.mktemp("hip")
    tool = bundler()
    codes = []
    for number, _ in enumerate(BUNDLE_TARGETS):
        code = work / f"code{number}.o"
        code.write_bytes(bytes([65 + number]) * 300)
        codes.append(f"-input={code}")
    listed: set[str] = set()
    bundles = []
    for name, targets, extra, env in (
            ("plain", BUNDLE_TARGETS[:2], [], {}),
            ("v2", BUNDLE_TARGETS[1:], ["-compress"], {"COMPRESSED_BUNDLE_FORMAT_VERSION": "2"}),
            ("v3", BUNDLE_TARGETS[2:], ["-compress"], {"COMPRESSED_BUNDLE_FORMAT_VERSION": "3"})):
        out = work / f"{name}.hipfb"
        subprocess.run([tool, "-type=o", "-bundle-align=4096", *extra,
                        "-targets=" + ",".join(("host-x86_64-unknown-linux-gnu", *targets)),
                        "-input=/dev/null", *codes[:len(targets)], f"-output={out}"],
                       check=True, timeout=60, env={**os.environ, **env})
        data = out.read_bytes()
        assert data.startswith(b"CCOB" if extra else b"__CLANG_OFFLOAD_BUNDLE__")
        bundles.append(data + bytes(-len(data) % 4096))
        done = subprocess.run([tool, "--list", "-type=o", f"-input={out}"], check=True,
                              capture_output=True, text=True, timeout=60)
        listed |= {line.partition("--")[2] for line in done.stdout.split()
                   if not line.startswith("host-")}
    (work / "all.hipfb").write_bytes(b"".join(bundles))
    (work / "kernels.s").write_text('.section .hip_fatbin,"a",@progbits\n.p2align 12\n'
                                    f'.incbin "{work / "all.hipfb"}"\n')
    subprocess.run(["as", str(work / "kernels.s"), "-o", str(work / "kernels.o")],
                   check=True, timeout=60)
    library = work / "libkernels.so"
    subprocess.run(["ld", "-shared", str(work / "kernels.o"), "-o", str(library)], check=True,
                   timeout=60)
    return library, listed


@pytest.fixture(scope="module")
def rocm_image(images: Images, base_image: str, hip_library: tuple[Path, set[str]]) -> str:
    return images.build("hip-kernels", base_image, [Step(
        add=[(hip_library[0], "/opt/app/lib/libkernels.so")],
        labels={"ai.aipcc.accelerator": "rocm"})])


def test_rocm_bundles_read_from_an_image_agree_with_clang_offload_bundler(
        rocm_image: str, hip_library: tuple[Path, set[str]], cache: Path) -> None:
    _, listed = hip_library
    assert listed == {"gfx90a:xnack-", "gfx942", "gfx11-generic"}
    code, report, plain = validate(f"containers-storage:{rocm_image}", cache)
    found = files_of(report)["/opt/app/lib/libkernels.so"]
    assert set(found["gfx"]) == listed and found["evidence"] == "3 offload bundles: 5 entries"
    assert report["images"][0]["gpu_code"] == {"rocm": {"gfx": sorted(listed)}}
    assert "gpu code: ROCm gfx11-generic gfx90a:xnack- gfx942" in plain


def test_a_rocm_image_expected_on_a_target_its_bundles_lack_fails(
        rocm_image: str, cache: Path) -> None:
    code, report, plain = validate(f"containers-storage:{rocm_image}", cache,
                                   "--expect-gpu-archs", "gfx1030,gfx90a:xnack-,gfx1101,sm_90")
    assert code == 1, plain
    [violation] = [f for f in report["images"][0]["findings"] if f["status"] == "violation"]
    assert (violation["path"], violation["component"]) == ("/opt/app/lib/libkernels.so",
                                                           "gfx1030")
    assert files_of(report)["/opt/app/lib/libkernels.so"]["runs_on"] == {
        "gfx1030": None, "gfx90a:xnack-": "gfx90a:xnack-", "gfx1101": "gfx11-generic"}
    code, _, plain = validate(f"containers-storage:{rocm_image}", cache,
                              "--expect-gpu-archs", "gfx90a:xnack+")
    assert code == 1 and "none of its GPU code runs on gfx90a:xnack+" in plain
