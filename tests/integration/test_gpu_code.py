"""The GPU code of real NVIDIA libraries from real wheels, installed into real images and
read through `aipcc-build validate`, compared with what NVIDIA's own cuobjdump (from its
PyPI wheel) lists for the same files; and the judging of the architectures an image must
run on, against those libraries."""

from __future__ import annotations

import json
import re
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
