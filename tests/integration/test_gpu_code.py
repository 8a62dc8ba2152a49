"""The GPU code of real libraries from real wheels, installed into real images and read
through `aipcc-build validate`, compared with what NVIDIA's own cuobjdump (from its PyPI
wheel) and LLVM's clang-offload-bundler (Debian's clang-tools-22) list for the same files;
and the judging of the architectures an image must run on, against those libraries.

The libraries: small NVIDIA component wheels (nvjpeg for CUDA 13, curand for 12.8); JAX's
CUDA 13 and ROCm 7 plugins (whole wheels of 5.6 and 3.8 MB, from the validator's corpus);
cupy-cuda13x's random-number kernels (one 4.8 MB member of its 70 MB wheel, fetched by
range requests and bound to the published wheel as tests/support/partial_wheels.py says);
ONNX Runtime's CUDA provider (the 284 MB member of onnxruntime-gpu, a wheel the corpus
downloads whole already); vLLM's FlashKDA kernels (one 1.6 MB member of its 336 MB wheel,
by range requests), whose family targets (sm_100f, sm_120f) cuobjdump names in its entry
headers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.matrix import load
from aipcc_build.render import apply, render_all
from tests.support.artifacts import wheel
from tests.support.layers import SITE, Images, Step, unzip_script
from tests.support.partial_wheels import partial_wheel
from tests.support.project import REPO

from .test_matrix_build import aipcc_build

pytestmark = pytest.mark.integration

NVJPEG13 = ("nvidia-nvjpeg", "13.3.2.43", "nvidia/cu13/lib/libnvjpeg.so.13")
CURAND128 = ("nvidia-curand-cu12", "10.3.9.90", "nvidia/curand/lib/libcurand.so.10")
CUOBJDUMP = ("nvidia-cuda-cuobjdump", "13.5.37", "nvidia/cu13/bin/cuobjdump")
JAX_CUDA13 = ("jax-cuda13-plugin", "0.9.2")
JAX_ROCM7 = ("jax-rocm7-plugin", "0.10.2")
ORT_GPU = ("onnxruntime-gpu", "1.31.1")
ORT_PROVIDER = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
CUPY13 = ("cupy-cuda13x", "14.2.0", "cp311-cp311-manylinux*x86_64")
CUPY_RANDOM = "cupy/random/_generator_api.cpython-311-x86_64-linux-gnu.so"
VLLM = ("vllm", "0.33.0", "cp38-abi3-manylinux*x86_64")
VLLM_KDA = "vllm/_flashkda_C.abi3.so"  # sm_90a, and sm_100f and sm_120f family code
# cupy's kernels: sm_75 to sm_90, family code sm_100f and sm_120f, and compute_120
_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(?:cubin|ptx)$")


def extract(wheelhouse: Path, spec: tuple[str, str, str], into: Path) -> Path:
    project, version, member = spec
    with zipfile.ZipFile(wheel(wheelhouse, project, version)) as archive:
        return Path(archive.extract(member, into))


def cuobjdump_lists(tool: Path, library: Path) -> tuple[set[str], set[str]]:
    """(SASS, PTX) architectures cuobjdump names in its entries' headers (`cuobjdump FILE`:
    `arch = sm_100f` under `Fatbin elf code:`, the arch-specific and family suffixes
    included; a PTX entry's sm_XX is compute_XX), checked against its --list-elf
    --list-ptx, which names an entry NAME.sm_XX.cubin (a family entry by its plain
    architecture); none for a file it says holds no device code."""
    def run(*options: str) -> list[str]:
        done = subprocess.run([str(tool), *options, str(library)], capture_output=True,
                              text=True, timeout=120)
        if done.returncode and "does not contain device code" in done.stderr:
            return []
        assert done.returncode == 0, done.stderr
        return [line.strip() for line in done.stdout.splitlines() if line.strip()]

    sass, ptx = set(), set()
    kind = ""
    for line in run():
        if line in ("Fatbin elf code:", "Fatbin ptx code:"):
            kind = line.split()[1]
        elif line.startswith("arch = ") and kind:
            arch = line.removeprefix("arch = ")
            assert re.fullmatch(r"sm_\d+[af]?", arch), line
            (sass if kind == "elf" else ptx).add(
                arch if kind == "elf" else arch.replace("sm_", "compute_"))
            kind = ""
    listed: tuple[set[str], set[str]] = (set(), set())
    for line in run("--list-elf", "--list-ptx"):
        match = _LISTED.match(line)
        assert match, f"cuobjdump printed a line this test cannot read: {line!r}"
        listed[match.group(1) == "PTX"].add(
            match.group(2) if match.group(1) == "ELF" else
            match.group(2).replace("sm_", "compute_"))
    assert listed == tuple({arch.removesuffix("f") for arch in found}
                           for found in (sass, ptx)), (listed, sass, ptx)
    return sass, ptx


@pytest.fixture(scope="module")
def cuobjdump(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tool = extract(wheelhouse, CUOBJDUMP, tmp_path_factory.mktemp("cuobjdump"))
    tool.chmod(0o755)
    return tool


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
        wheelhouse: Path, cuobjdump: Path, cache: Path, tmp_path: Path) -> None:
    image = request.getfixturevalue(fixture)
    sass, ptx = cuobjdump_lists(cuobjdump, extract(wheelhouse, spec, tmp_path))
    assert sass, f"cuobjdump lists no SASS in {spec[2]}"
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
    # by number (toolkit.gpu_archs' one order), not by text: gfx9 before gfx11
    ordered = ["gfx90a:xnack-", "gfx942", "gfx11-generic"]
    assert report["images"][0]["gpu_code"] == {"rocm": {"gfx": ordered}}
    assert f"gpu code: ROCm {' '.join(ordered)}" in plain


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


@dataclass(frozen=True)
class RealLibraries:
    image: str
    files: dict[str, Path]  # each ELF file's path in the image: the same bytes on the host


def real_image(images: Images, base_image: str, short: str, labels: dict[str, str],
               layers: list[tuple[Path, list[str]]], host: Path) -> RealLibraries:
    """An image of one layer per (wheel, members) of LAYERS, its members (all of the
    wheel's when none are named) unzipped where pip installs them, as pip lays them out;
    and the same members of every shared object on the host, under HOST."""
    steps, files = [], {}
    for number, (archive, members) in enumerate(layers):
        steps.append(Step(
            script=f"unzip -q -o /wheels/{archive.name} {' '.join(members)} -d {SITE}",
            volumes=[(archive.parent, "/wheels")],
            labels=labels if number == len(layers) - 1 else {}))
        with zipfile.ZipFile(archive) as unpacked:
            for name in members or [n for n in unpacked.namelist() if n.endswith(".so")]:
                files[f"{SITE}/{name}"] = Path(unpacked.extract(name, host))
    return RealLibraries(images.build(short, base_image, steps), files)


@pytest.fixture(scope="module")
def real_cuda13(images: Images, base_image: str, corpus_wheels: Path,
                tmp_path_factory: pytest.TempPathFactory) -> RealLibraries:
    """A CUDA 13 image of JAX's CUDA 13 plugin, cupy's random-number kernels, ONNX
    Runtime's CUDA provider and vLLM's FlashKDA kernels, a layer each."""
    cupy = partial_wheel(*CUPY13, [CUPY_RANDOM])
    vllm = partial_wheel(*VLLM, [VLLM_KDA])
    return real_image(images, base_image, "real-cuda13", {
        "ai.aipcc.accelerator": "cuda", "ai.aipcc.accelerator.version": "13"}, [
        (wheel(corpus_wheels, *JAX_CUDA13), []), (cupy, [CUPY_RANDOM]),
        (wheel(corpus_wheels, *ORT_GPU), [ORT_PROVIDER]), (vllm, [VLLM_KDA])],
        tmp_path_factory.mktemp("real-cuda13"))


@pytest.fixture(scope="module")
def real_rocm7(images: Images, base_image: str, corpus_wheels: Path,
               tmp_path_factory: pytest.TempPathFactory) -> RealLibraries:
    """A ROCm 7 image of JAX's ROCm 7 plugin, whose kernels hipcc bundled compressed."""
    return real_image(images, base_image, "real-rocm7", {
        "ai.aipcc.accelerator": "rocm", "ai.aipcc.accelerator.version": "7.2"},
        [(wheel(corpus_wheels, *JAX_ROCM7), [])], tmp_path_factory.mktemp("real-rocm7"))


JAX_CUDA = ({"sm_75", "sm_80", "sm_90", "sm_100", "sm_120"}, {"compute_120"})


def test_real_cuda_libraries_read_from_an_image_agree_with_cuobjdump(
        real_cuda13: RealLibraries, cuobjdump: Path, cache: Path) -> None:
    _, report, _ = validate(f"containers-storage:{real_cuda13.image}", cache)
    found = files_of(report)
    listed = {path: cuobjdump_lists(cuobjdump, host)
              for path, host in real_cuda13.files.items()}
    assert {path: (set(f["sass"]), set(f["ptx"])) for path, f in found.items()} == {
        path: code for path, code in listed.items() if code != (set(), set())}
    # what cuobjdump 13.5 lists, so that the comparison above compares something
    jax = f"{SITE}/jax_cuda13_plugin"
    assert {path: listed[path] for path in found if path.startswith(jax)} == {
        f"{jax}/{name}.so": JAX_CUDA for name in ("_linalg", "_prng", "_solver", "_triton")}
    assert listed[f"{SITE}/{CUPY_RANDOM}"] == (
        {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100f", "sm_120f"}, {"compute_120"})
    assert listed[f"{SITE}/{ORT_PROVIDER}"] == (
        {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_120a"}, set())
    assert listed[f"{SITE}/{VLLM_KDA}"] == ({"sm_90a", "sm_100f", "sm_120f"}, set())
    [verdict] = report["images"]
    assert verdict["gpu_code"] == {"cuda": {
        "sass": ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100f",
                 "sm_120", "sm_120a", "sm_120f"], "ptx": ["compute_120"]}}


def test_real_cuda13_libraries_judged(real_cuda13: RealLibraries, cache: Path) -> None:
    """sm_70: CUDA 13 dropped Volta, none runs there; sm_86 runs JAX's sm_80 code; sm_110
    (Thor) none of them (sm_100 code is another major, their PTX is for 12.0); a later
    major only their PTX, by JIT; ONNX Runtime's provider only the GPUs of its SASS (its
    sm_90a and sm_120a run on sm_90 and sm_120 alone, it carries no PTX); vLLM's family
    and cupy's family code every GPU of its family from its own on (sm_100f on sm_103,
    sm_120f on sm_121)."""
    ref = f"containers-storage:{real_cuda13.image}"
    code, report, plain = validate(ref, cache, "--expect-gpu-archs", "sm_90")
    assert code == 0, plain  # the one GPU each of them has code for
    assert files_of(report)[f"{SITE}/{ORT_PROVIDER}"]["runs_on"] == {"sm_90": "sm_90a"}
    code, report, plain = validate(ref, cache, "--expect-gpu-archs",
                                   "sm_70,sm_86,sm_100,sm_103,sm_110,sm_121,sm_130")
    assert code == 1, plain
    files = files_of(report)
    expected = {
        f"{SITE}/jax_cuda13_plugin/_linalg.so": {
            "sm_70": None, "sm_86": "sm_80", "sm_100": "sm_100", "sm_103": "sm_100",
            "sm_110": None, "sm_121": "sm_120", "sm_130": "compute_120"},
        f"{SITE}/{CUPY_RANDOM}": {
            "sm_70": None, "sm_86": "sm_86", "sm_100": "sm_100f", "sm_103": "sm_100f",
            "sm_110": None, "sm_121": "sm_120f", "sm_130": "compute_120"},
        f"{SITE}/{ORT_PROVIDER}": {
            "sm_70": None, "sm_86": "sm_86", "sm_100": None, "sm_103": None, "sm_110": None,
            "sm_121": None, "sm_130": None},
        f"{SITE}/{VLLM_KDA}": {
            "sm_70": None, "sm_86": None, "sm_100": "sm_100f", "sm_103": "sm_100f",
            "sm_110": None, "sm_121": "sm_120f", "sm_130": None}}
    assert {path: files[path]["runs_on"] for path in expected} == expected
    [verdict] = report["images"]
    violations = {(f["path"], f["component"]) for f in verdict["findings"]
                  if f["status"] == "violation"}
    assert violations == {(path, arch) for path in files
                          for arch, runs in files[path]["runs_on"].items() if runs is None}
    assert f"{SITE}/{ORT_PROVIDER}" in plain and "none of its GPU code runs on sm_100" in plain


def bundler_lists(library: Path, work: Path) -> set[str]:
    """The targets clang-offload-bundler lists for the bundles in LIBRARY's .hip_fatbin.
    objcopy cuts the section out; the bundler reads one bundle a file, so each is cut at
    its page-aligned start and, compressed, at the total size its header states (version
    2: 32 bits at byte 8, version 3: 64 bits), a plain one at the next bundle."""
    section = work / f"{library.name}.hip_fatbin"
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", str(library),
                    str(section)], check=True, timeout=60)
    data = section.read_bytes()
    starts = [at for at in range(0, len(data), 4096)
              if data.startswith((b"CCOB", b"__CLANG_OFFLOAD_BUNDLE__"), at)]
    listed: set[str] = set()
    for at, following in zip(starts, [*starts[1:], len(data)]):
        end = following
        if data.startswith(b"CCOB", at):
            version = int.from_bytes(data[at + 4:at + 6], "little")
            width = {2: 4, 3: 8}[version]
            end = at + int.from_bytes(data[at + 8:at + 8 + width], "little")
        bundle = work / f"{library.name}.{at}.bundle"
        bundle.write_bytes(data[at:end])
        done = subprocess.run([bundler(), "--list", "-type=o", f"-input={bundle}"],
                              check=True, capture_output=True, text=True, timeout=60)
        listed |= {line.partition("--")[2] for line in done.stdout.split()
                   if not line.startswith("host-")}
    return listed


def test_a_real_rocm_library_read_from_an_image_agrees_with_clang_offload_bundler(
        real_rocm7: RealLibraries, cache: Path, tmp_path: Path) -> None:
    _, report, _ = validate(f"containers-storage:{real_rocm7.image}", cache)
    found = files_of(report)
    listed = {path: bundler_lists(host, tmp_path) for path, host in real_rocm7.files.items()}
    assert {path: set(f["gfx"]) for path, f in found.items()} == {
        path: targets for path, targets in listed.items() if targets}
    plugin = f"{SITE}/jax_rocm7_plugin"
    assert sorted(found) == [f"{plugin}/{name}.so" for name in ("_linalg", "_prng", "_solver")]
    assert len(listed[f"{plugin}/_linalg.so"]) == 27 and "gfx942" in listed[f"{plugin}/_linalg.so"]
    assert found[f"{plugin}/_solver.so"]["evidence"] == "2 offload bundles: 54 entries"


def test_a_real_rocm_image_expected_on_a_target_its_bundles_lack_fails(
        real_rocm7: RealLibraries, cache: Path) -> None:
    """gfx803 (Polaris) is none of the plugin's 27 targets; gfx90a code built without a
    feature flag runs with xnack on."""
    ref = f"containers-storage:{real_rocm7.image}"
    code, report, plain = validate(ref, cache, "--expect-gpu-archs", "gfx942,gfx90a:xnack+")
    assert code == 0, plain
    assert files_of(report)[f"{SITE}/jax_rocm7_plugin/_prng.so"]["runs_on"] == {
        "gfx942": "gfx942", "gfx90a:xnack+": "gfx90a"}
    code, report, plain = validate(ref, cache, "--expect-gpu-archs", "gfx803,gfx1101")
    assert code == 1, plain
    violations = {(f["path"], f["component"]) for f in report["images"][0]["findings"]
                  if f["status"] == "violation"}
    assert violations == {(f"{SITE}/jax_rocm7_plugin/{name}.so", "gfx803")
                          for name in ("_linalg", "_prng", "_solver")}
    assert "none of its GPU code runs on gfx803" in plain


def test_a_matrix_build_records_the_gpu_code_and_fails_a_declared_gpu_it_lacks(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str,
        corpus_wheels: Path) -> None:
    """`aipcc-build matrix` validates what it built against its entry's gpu_archs: the
    report records what the validator read; a declared GPU none of a library's code runs
    on fails the image (exit 1), naming the library and the GPU; select, given the report,
    refuses the image for a node of that GPU whatever the matrix declares."""
    library = "jax_cuda13_plugin/_prng.so"
    with zipfile.ZipFile(wheel(corpus_wheels, *JAX_CUDA13)) as unpacked:
        unpacked.extract(library, tmp_path / "context" / "site-packages")
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "gpu.j2").write_text(
        f"FROM {{{{ os_from }}}}\nCOPY site-packages/ {SITE}/\n")
    (tmp_path / "matrix").mkdir()
    path = f"{SITE}/{library}"
    for run, (archs, expected) in enumerate((("[sm_86, sm_130]", 0), ("[sm_70, sm_90]", 1))):
        (tmp_path / "matrix" / "test.yaml").write_text(
            "schema: 1\n"
            "product: {name: t, version: '1'}\n"
            "registry: localhost/aipcc-test-sched/unused\n"
            f"os:\n  bb: {{from: {unique_base[0]}}}\n"
            f"accelerators:\n  cuda:\n    versions:\n"
            f"      - {{version: 13.0.2, gpu_archs: {archs}}}\n"
            "images:\n  gpu: {template: gpu.j2, os: [bb], context: ../context}\n")
        matrix = load(tmp_path / "matrix" / "test.yaml")
        apply(matrix, render_all(matrix), check=False, remove_stale=False)
        done = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "matrix", "--registry",
                           namespace, "--build-id", str(run), "--report", f"{run}.json")
        assert done.returncode == expected, done.stdout + done.stderr
        [built] = json.loads((tmp_path / f"{run}.json").read_text())["images"]
        assert built["gpu_code_files"] == [{"path": path, **{
            kind: sorted(archs, key=lambda a: int(a.split("_")[1]))
            for kind, archs in zip(("sass", "ptx", "gfx"), (*JAX_CUDA, set()))}}]
    assert built["status"] == "failed"
    assert path in built["message"] and "none of its GPU code runs on sm_70 (gpu_archs of " \
        "the matrix's cuda 13.0.2 entry)" in built["message"]
    assert "sm_90" not in built["message"].replace("sm_90,", "")
    # select reads what the build measured: the matrix now declares sm_70, the code the
    # first build recorded does not run there
    answers = {}
    for capability in ("7.0", "9.0"):
        chosen = aipcc_build(tmp_path, "--matrix", "matrix/test.yaml", "select",
                             "--compute-capability", capability, "--driver", "580.65.06",
                             "--report", "0.json", "--json")
        answers[capability] = (chosen.returncode, json.loads(chosen.stdout))
    code, answer = answers["7.0"]
    assert code == 1 and answer["runnable"] == []
    [excluded] = answer["excluded"]
    assert excluded["reasons"] == [{"code": "no GPU code for the node", "detail": (
        f"{path} has no code that runs on sm_70 (SASS sm_75, sm_80, sm_90, sm_100, sm_120; "
        "PTX compute_120)")}]
    code, answer = answers["9.0"]
    assert code == 0 and [i["name"] for i in answer["runnable"]] == ["cuda-13.0-bb"]
