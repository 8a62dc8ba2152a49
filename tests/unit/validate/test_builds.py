"""Issue 29.3-29.4 on small inputs: ROCm builds named by distributions and shared objects
and linked in dynamic sections, judged as CUDA builds are, in both directions; NVIDIA's
bindings; build records as the frameworks write them; Debian's CUDA versions; packages
that pick one of several backends at run time. The real wheels and packages are in the
corpus (tests/data/validator-corpus.yaml) and tests/integration/test_real_builds.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from aipcc_build.validate.builds import backend, distribution_evidence, tag_release
from aipcc_build.validate.distributions import wheel_evidence
from aipcc_build.validate.packages import debian_cuda_release
from aipcc_build.validate.results import OK, VIOLATION, WARNING, Expectation
from aipcc_build.validate.verdict import judge
from tests.support.layers import member, tar_bytes

from .test_validate_units import image, scan

SITE = "opt/venv/lib/python3.11/site-packages"
ROCM64, ROCM72 = Expectation("rocm", "6.4.4"), Expectation("rocm", "7.2.0")
CUDA128, CPU = Expectation("cuda", "12.8.1"), Expectation("cpu")


@pytest.mark.parametrize("family, tag, release", [
    ("cuda", "128", "12.8"), ("cuda", "118", "11.8"), ("cuda", "12", "12"),
    ("rocm", "64", "6.4"), ("rocm", "714", "7.14"), ("rocm", "7", "7"), ("rocm", "", None)])
def test_backend_tags(family: str, tag: str, release: str | None) -> None:
    assert tag_release(family, tag) == release


@pytest.mark.parametrize("name, version, toolkit, release", [
    ("jax_rocm7_plugin", "0.10.2", "rocm", "7"),
    ("jax_rocm60_plugin", "0.5.0", "rocm", "6.0"),
    ("jax_rocm7_pjrt", "0.12.0", "rocm", "7"),
    ("onnxruntime_rocm", "1.22.2.post3", "rocm", None),
    ("torch", "2.9.1+rocm6.4", "rocm", "6.4"),
    ("hip_python", "6.4.1.552.27", "rocm", "6.4"),
    ("cuda_bindings", "13.0.3", "cuda", "13"),
    ("cuda_python", "12.9.0", "cuda", "12"),
    ("torch", "2.8.0+cu128", "cuda", "12.8"),
])
def test_distributions_that_name_a_build(name: str, version: str, toolkit: str,
                                         release: str | None) -> None:
    found = wheel_evidence(f"/{SITE}/{name}-{version}.dist-info", name, version)
    assert found is not None and (found.toolkit, found.release) == (toolkit, release)
    assert found.built


def test_names_that_are_no_build() -> None:
    assert distribution_evidence("/x", "cuda-core", "0.3.2", "cuda-core 0.3.2", "") is None
    assert wheel_evidence(f"/{SITE}/rocket-1.0.dist-info", "rocket", "1.0") is None
    assert backend(f"/{SITE}/torch/lib/libtorch_global_deps.so") is None
    assert backend(f"/{SITE}/bitsandbytes/libbitsandbytes_rocm64.so") == ("rocm", "6.4")
    assert backend(f"/{SITE}/torch/lib/libtorch_hip.so") == ("rocm", None)


@pytest.mark.parametrize("version, release", [
    ("11.8.89~11.8.0-5~deb12u1", "11.8"),
    ("11.1.1+~10.9.0.58~11.8.0-5~deb12u1", "11.8"),  # libcufft10: read as 10.9 before
    ("11.1.1+~10.3.0.86~11.8.0-5~deb12u1", "11.8"),  # libcurand10: read as 10.3 before
    ("11.8.0-5~deb12u1", "11.8"), ("1:11.8.89~11.8.0-5", "11.8")])
def test_debian_cuda_versions(version: str, release: str) -> None:
    assert debian_cuda_release(version) == release


def _verdict(tmp_path: Path, members: list, expect: Expectation):  # type: ignore[no-untyped-def,type-arg]
    return judge(ref="r", image=image(), scans=[scan(tmp_path, tar_bytes(members))],
                 expect=expect)


def _statuses(verdict, kind: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.status for f in verdict.findings if f.evidence == kind}


@pytest.mark.parametrize("dist, rocm64, rocm72, cuda128", [
    ("jax_rocm7_plugin-0.10.2", VIOLATION, OK, VIOLATION),
    ("jax_rocm60_plugin-0.5.0", WARNING, VIOLATION, VIOLATION),
    ("torch-2.9.1+rocm6.4", OK, VIOLATION, VIOLATION),
    ("torch-2.8.0+cu128", VIOLATION, VIOLATION, OK),
    ("jax_cuda12_plugin-0.9.2", VIOLATION, VIOLATION, OK),
    ("cuda_bindings-13.0.3", VIOLATION, VIOLATION, VIOLATION),
])
def test_builds_of_either_family_are_judged_alike(tmp_path: Path, dist: str, rocm64: str,
                                                  rocm72: str, cuda128: str) -> None:
    """A ROCm build in a CUDA image and a CUDA build in a ROCm image are violations; an
    older minor of the image's major is a warning in both families."""
    layer = [member(f"{SITE}/{dist}.dist-info/METADATA", b"Name: x\n")]
    for expect, status in ((ROCM64, rocm64), (ROCM72, rocm72), (CUDA128, cuda128)):
        assert _statuses(_verdict(tmp_path, layer, expect), "dist-info") == {status}, expect


def test_build_records_as_the_frameworks_write_them(tmp_path: Path) -> None:
    tensorflow = (b"import collections\n\nbuild_info = collections.OrderedDict([('cpu_compiler'"
                  b", 'clang'), ('cuda_version', '12.5.1'), ('cudnn_version', '9'), "
                  b"('is_cuda_build', True), ('is_rocm_build', False)])\n")
    layer = [member(f"{SITE}/tensorflow/python/platform/build_info.py", tensorflow),
             member(f"{SITE}/torch/version.py", b"cuda: Optional[str] = None\n"
                                                b"hip: Optional[str] = '6.4.43484-123'\n")]
    verdict = _verdict(tmp_path, layer, CUDA128)
    found = {(f.evidence, f.version, f.status) for f in verdict.findings}
    assert ("build-info", "12.5", WARNING) in found  # an older minor of the image's major
    assert ("torch-version", "6.4", VIOLATION) in found
    assert {(f.version, f.status) for f in _verdict(tmp_path, layer, ROCM64).findings} == {
        ("12.5", VIOLATION), ("6.4", OK)}


BACKENDS = ["cpu", "cuda118", "cuda128", "cuda130", "rocm64", "rocm72"]


@pytest.mark.parametrize("expect, status", [
    (CUDA128, OK), (Expectation("cuda", "13.0"), OK), (ROCM64, OK), (ROCM72, OK), (CPU, OK),
    (Expectation("cuda", "12.9"), VIOLATION), (Expectation("rocm", "5.2"), VIOLATION)])
def test_a_package_of_many_backends_is_judged_alike_in_every_family(
        tmp_path: Path, expect: Expectation, status: str) -> None:
    layer = [member(f"{SITE}/bitsandbytes/libbitsandbytes_{name}.so", b"\x7fELF")
             for name in BACKENDS]
    verdict = _verdict(tmp_path, layer, expect)
    [finding] = verdict.findings
    assert (finding.evidence, finding.path, finding.status) == (
        "backend", f"/{SITE}/bitsandbytes", status)
    assert "6 backends (cpu, cuda 11.8, cuda 12.8, cuda 13.0, rocm 6.4, rocm 7.2)" \
        in finding.reason


def test_one_backend_is_a_build_of_its_family(tmp_path: Path) -> None:
    """torch's libtorch_cuda.so beside libtorch_cpu.so is a CUDA build, not a choice."""
    layer = [member(f"{SITE}/torch/lib/libtorch_{name}.so", b"\x7fELF")
             for name in ("cpu", "cuda")]
    assert _statuses(_verdict(tmp_path, layer, ROCM64), "cuda-build") == {VIOLATION}
    assert _statuses(_verdict(tmp_path, layer, CUDA128), "cuda-build") == {OK}
    hip = [member(f"{SITE}/torch/lib/libtorch_hip.so", b"\x7fELF")]
    assert _statuses(_verdict(tmp_path, hip, CUDA128), "rocm-build") == {VIOLATION}
    assert _statuses(_verdict(tmp_path, hip, ROCM64), "rocm-build") == {OK}


@pytest.mark.integration  # links shared objects with the real gcc
@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on this machine")
def test_what_a_shared_object_links_names_its_release(tmp_path: Path) -> None:
    """gcc links a provider against a HIP runtime (NEEDED libamdhip64.so.7, RUNPATH
    /opt/rocm-7.2.4/lib) and another against a CUDA runtime (NEEDED libcudart.so.12)."""
    def shared(name: str, soname: str, *link: str) -> bytes:
        source = tmp_path / f"{name}.c"
        source.write_text("int dep(void);\nint use(void) { return dep(); }\n"
                          if link else "int dep(void) { return 1; }\n")
        out = tmp_path / name
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), f"-Wl,-soname,{soname}",
                        str(source), *link], check=True)
        return out.read_bytes()

    shared("libamdhip64.so.7", "libamdhip64.so.7")
    shared("libcudart.so.12", "libcudart.so.12")
    rocm = shared("provider.so", "provider.so", str(tmp_path / "libamdhip64.so.7"),
                  "-Wl,--enable-new-dtags,-rpath,/opt/rocm/lib:/opt/rocm-7.2.4/lib")
    cuda = shared("ext.so", "ext.so", str(tmp_path / "libcudart.so.12"))
    layer = [member(f"{SITE}/onnxruntime/capi/libonnxruntime_providers_rocmish.so", rocm),
             member(f"{SITE}/cupy/_core/core.cpython-311-x86_64-linux-gnu.so", cuda)]
    linked = {f.path.rsplit("/", 1)[-1]: (f.toolkit, f.version, f.status)
              for f in _verdict(tmp_path, layer, ROCM64).findings if f.evidence == "linked"}
    assert linked == {"libonnxruntime_providers_rocmish.so": ("rocm", "7.2", VIOLATION),
                      "core.cpython-311-x86_64-linux-gnu.so": ("cuda", "12", VIOLATION)}
    linked = {f.path.rsplit("/", 1)[-1]: f.status
              for f in _verdict(tmp_path, layer, ROCM72).findings if f.evidence == "linked"}
    assert linked == {"libonnxruntime_providers_rocmish.so": OK,
                      "core.cpython-311-x86_64-linux-gnu.so": VIOLATION}
