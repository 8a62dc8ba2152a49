"""Issue 21 and 22 item 18 on hand-made layers: vendored and private copies, build records,
the distribution that brought a file, links named like CUDA libraries, declared platforms."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

from aipcc_build.imagefs.image import PlatformImage
from aipcc_build.validate import validate_image
from aipcc_build.validate.results import OK, VIOLATION, WARNING, Expectation, Finding
from aipcc_build.validate.verdict import judge
from tests.support.elf import EM_AARCH64, EM_X86_64, runtime_elf
from tests.support.layers import member, oci_layout, tar_bytes

from .test_validate_units import image, scan

SITE = "opt/venv/lib/python3.11/site-packages"
CUDA128 = Expectation("cuda", "12.8.1")
CPU = Expectation("cpu")
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def record(dist: str, *files: str) -> tuple[tarfile.TarInfo, bytes]:
    lines = "".join(f"{f},sha256=x,1\n" for f in files)
    return member(f"{SITE}/{dist}.dist-info/RECORD", lines.encode())


def findings(tmp_path: Path, members: list, expected: Expectation,
             env: dict[str, str] | None = None) -> dict[str, Finding]:
    layer = scan(tmp_path, tar_bytes(members), f"layer-{len(list(tmp_path.iterdir()))}")
    verdict = judge(ref="r", image=image(env), scans=[layer], expect=expected)
    return {f.path.removeprefix(f"/{SITE}/"): f for f in verdict.findings}


def test_auditwheel_names_are_matched_to_their_component(tmp_path: Path) -> None:
    members = [
        member(f"{SITE}/foo.libs/libcudart-53d54daa.so.12.6.68", b"\x7fELF"),
        member(f"{SITE}/foo.libs/libnvrtc-0a1b2c3d.so.12.6.85", b"\x7fELF"),
        member(f"{SITE}/foo-1.0.dist-info/METADATA", b"Name: foo\n"),
        record("foo-1.0", "foo.libs/libcudart-53d54daa.so.12.6.68",
               "foo.libs/libnvrtc-0a1b2c3d.so.12.6.85"),
    ]
    found = findings(tmp_path, members, CUDA128)
    cudart = found["foo.libs/libcudart-53d54daa.so.12.6.68"]
    assert cudart.status == VIOLATION and cudart.version == "12.6"
    assert cudart.component == "cuda-runtime" and cudart.distribution == "foo 1.0"
    assert "vendored" in cudart.reason and cudart.layer_digest
    assert "(from foo 1.0)" in cudart.line()
    assert found["foo.libs/libnvrtc-0a1b2c3d.so.12.6.85"].status == VIOLATION
    for finding in findings(tmp_path, members, CPU).values():
        if finding.component in ("cuda-runtime", "cuda-nvrtc"):
            assert finding.status == VIOLATION


def test_a_runtime_named_by_its_major_is_read_from_its_code(tmp_path: Path) -> None:
    for machine in (EM_X86_64, EM_AARCH64):
        members = [member(f"{SITE}/torchvision.libs/libcudart.45e7f3ed.so.12",
                          runtime_elf(machine, 12060))]
        [found] = findings(tmp_path, members, CUDA128).values()
        assert found.status == VIOLATION and found.version == "12.6", found
        assert "cudaRuntimeGetVersion" in found.reason
        members = [member(f"{SITE}/torchvision.libs/libcudart.45e7f3ed.so.12",
                          runtime_elf(machine, 12080))]
        [found] = findings(tmp_path, members, CUDA128).values()
        assert found.status == OK and found.version == "12.8"
        [found] = findings(tmp_path, members, CPU).values()
        assert found.status == VIOLATION
    # Code this reader cannot decode: the major from the name still fits a 12.x image.
    members = [member(f"{SITE}/bar.libs/libcudart-0badc0de.so.12", b"not an ELF file")]
    [found] = findings(tmp_path, members, CUDA128).values()
    assert found.status == OK and found.version == "12"
    [found] = findings(tmp_path, members, Expectation("cuda", "13.0.2")).values()
    assert found.status == VIOLATION


def test_private_toolchains_are_reported_apart(tmp_path: Path) -> None:
    nvidia = f"{SITE}/triton/backends/nvidia"
    members = [member(f"{nvidia}/bin/ptxas", b"\x7fELF"),
               member(f"{nvidia}/lib/cupti/libcupti.so.2025.1.1", b"\x7fELF"),
               member(f"{SITE}/triton-3.4.0.dist-info/METADATA", b"Name: triton\n"),
               record("triton-3.4.0", "triton/backends/nvidia/bin/ptxas",
                      "triton/backends/nvidia/lib/cupti/libcupti.so.2025.1.1")]
    found = findings(tmp_path, members, CUDA128)
    cupti = found["triton/backends/nvidia/lib/cupti/libcupti.so.2025.1.1"]
    assert cupti.status == OK and cupti.evidence == "private-toolchain"
    assert "triton keeps for itself" in cupti.reason and cupti.distribution == "triton 3.4.0"
    assert found["triton/backends/nvidia/bin/ptxas"].status == OK
    for finding in findings(tmp_path, members, CPU).values():
        assert finding.status == WARNING, finding
    # Loaded as the image's runtime, it is judged as one: CUPTI 2025.1.1 cannot be placed.
    loaded = findings(tmp_path, members, CUDA128,
                      {"LD_LIBRARY_PATH": f"/{nvidia}/lib/cupti"})
    assert loaded["triton/backends/nvidia/lib/cupti/libcupti.so.2025.1.1"].status == WARNING


def test_build_records_of_frameworks(tmp_path: Path) -> None:
    members = [member(f"{SITE}/onnxruntime/capi/build_and_package_info.py",
                      b"package_name = 'onnxruntime-gpu'\n__version__ = '1.23.0'\n"
                      b"cuda_version = '13.0'\n")]
    [found] = findings(tmp_path, members, CUDA128).values()
    assert found.status == VIOLATION and found.version == "13.0"
    members = [member(f"{SITE}/onnxruntime/capi/build_and_package_info.py",
                      b"cuda_version = '12.2'\n"),
               member(f"{SITE}/tensorflow/python/platform/build_info.py",
                      b"build_info = {'cuda_version': '12.5.1', 'is_cuda_build': True}\n"),
               member(f"{SITE}/paddle/version/__init__.py", b"cuda_version     = '12.8'\n")]
    found = findings(tmp_path, members, CUDA128)
    # An older minor of the same major runs under minor-version compatibility.
    assert found["onnxruntime/capi/build_and_package_info.py"].status == WARNING
    assert found["tensorflow/python/platform/build_info.py"].status == WARNING
    assert found["paddle/version/__init__.py"].status == OK
    assert {f.status for f in findings(tmp_path, members, CPU).values()} == {VIOLATION}
    members = [member(f"{SITE}/paddle/version/__init__.py", b"cuda_version     = 'False'\n")]
    assert findings(tmp_path, members, CPU) == {}  # a CPU build says no CUDA


def test_names_of_cuda_builds(tmp_path: Path) -> None:
    members = [member(f"{SITE}/foo_cu126-1.0.dist-info/METADATA", b"x"),
               member(f"{SITE}/jax_cuda12_plugin-0.7.0.dist-info/METADATA", b"x"),
               member(f"{SITE}/torch-2.7.0+cu126.dist-info/METADATA", b"x"),
               member(f"{SITE}/onnxruntime/capi/libonnxruntime_providers_cuda.so", b"x"),
               member(f"{SITE}/nvidia_nccl_cu12-2.26.2.dist-info/METADATA", b"x"),
               member(f"{SITE}/nvidia_cudnn_cu12-9.1.0.70.dist-info/METADATA", b"x")]
    found = {f.component: f for f in findings(tmp_path, members, CUDA128).values()}
    assert found["foo-cu126"].status == WARNING and found["foo-cu126"].version == "12.6"
    assert found["jax-cuda12-plugin"].status == OK
    assert found["torch"].status == WARNING  # built with 12.6, runs on 12.8
    assert found["onnxruntime"].status == OK  # a CUDA build in a CUDA image
    assert found["nccl-cu12"].status == OK and found["cudnn-cu12"].status == OK
    cpu = {f.component: f for f in findings(tmp_path, members, CPU).values()}
    assert {f.status for f in cpu.values()} == {VIOLATION}
    cuda13 = {f.component: f for f in
              findings(tmp_path, members, Expectation("cuda", "13.0.2")).values()}
    assert cuda13["nccl-cu12"].status == VIOLATION
    assert cuda13["jax-cuda12-plugin"].status == VIOLATION


def test_own_scheme_libraries_take_the_major_from_their_distribution(tmp_path: Path) -> None:
    members = [member(f"{SITE}/foo/lib/libnccl.so.2.26.2", b"x"),
               member(f"{SITE}/nvidia_foo_cu12-1.0.dist-info/METADATA", b"x"),
               record("nvidia_foo_cu12-1.0", "foo/lib/libnccl.so.2.26.2")]
    found = findings(tmp_path, members, CUDA128)
    nccl = found["foo/lib/libnccl.so.2.26.2"]
    assert nccl.status == OK and nccl.version == "12" and nccl.distribution == "nvidia-foo-cu12 1.0"
    alone = findings(tmp_path, members[:1], CUDA128)["foo/lib/libnccl.so.2.26.2"]
    assert alone.status == WARNING and "own scheme" in alone.reason


def test_links_named_like_cuda_libraries(tmp_path: Path) -> None:
    lib = "usr/lib/x86_64-linux-gnu"
    members = [member(f"{lib}/libfoo.so", b"x"),
               member(f"{lib}/libcudart.so.12.9.79", kind=tarfile.SYMTYPE, link="libfoo.so"),
               member(f"{lib}/libnvrtc.so.12.9.86", kind=tarfile.LNKTYPE, link=f"{lib}/libfoo.so"),
               member(f"{lib}/libcublas.so.12.9.1.4", kind=tarfile.LNKTYPE, link=f"{lib}/gone")]
    layer = scan(tmp_path, tar_bytes(members))
    verdict = judge(ref="r", image=image(), scans=[layer], expect=CUDA128)
    by_path = {(f.path, f.evidence): f for f in verdict.findings}
    link = by_path[(f"/{lib}/libcudart.so.12.9.79", "library")]
    assert link.status == VIOLATION and "symbolic link to libfoo.so" in link.reason
    assert by_path[(f"/{lib}/libnvrtc.so.12.9.86", "library")].status == VIOLATION
    assert (f"/{lib}/libnvrtc.so.12.9.86", "layer") not in by_path  # its target is there
    # A hard link to a file the layer does not hold: the engine refuses the layer.
    refused = by_path[("/", "layer")]
    assert refused.status == VIOLATION and refused.reason == (
        f"refused-layer: layer {layer.digest} is refused by the container engine: hard link "
        f"/{lib}/libcublas.so.12.9.1.4 to '{lib}/gone', which the layer does not hold as a "
        "file before it")


def test_a_declared_platform_its_config_contradicts_fails(tmp_path: Path) -> None:
    layer = scan(tmp_path, tar_bytes([member("etc/os-release", b"ID=debian\n")]))
    config = {"os": "linux", "architecture": "amd64", "config": {}}
    lying = PlatformImage("linux/arm64", None, config, ())
    verdict = judge(ref="r", image=lying, scans=[layer], expect=CPU)
    [finding] = [f for f in verdict.findings if f.component == "platform"]
    assert finding.status == VIOLATION and "linux/amd64" in finding.reason
    honest = PlatformImage("linux/amd64", None, config, ())
    assert judge(ref="r", image=honest, scans=[layer], expect=CPU).ok


def test_an_index_labelling_an_amd64_manifest_arm64_is_caught(tmp_path: Path) -> None:
    """Issue 22 item 18: the platform an index declares is compared with the config's."""
    layer = tar_bytes([member("etc/os-release", b"ID=debian\n")])
    ref = oci_layout(tmp_path / "image", [layer])
    # The layout's index.json leads to an image index (as `buildah manifest push` writes)
    # whose one manifest, an amd64 image, is declared linux/arm64.
    top = tmp_path / "image" / "index.json"
    [manifest] = json.loads(top.read_text())["manifests"]
    nested = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [
        {**manifest, "mediaType": MANIFEST,
         "platform": {"os": "linux", "architecture": "arm64"}}]}).encode()
    digest = hashlib.sha256(nested).hexdigest()
    (tmp_path / "image" / "blobs" / "sha256" / digest).write_bytes(nested)
    top.write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": INDEX, "digest": f"sha256:{digest}", "size": len(nested)}]}))
    [verdict] = validate_image(ref, expect=CPU, platform="linux/arm64",
                               cache_dir=tmp_path / "cache")
    assert verdict.platform == "linux/arm64" and verdict.verdict == "failed"
    [finding] = [f for f in verdict.findings if f.status == VIOLATION]
    assert finding.path == "config:architecture" and "linux/amd64" in finding.reason


def test_a_release_numbered_version_of_another_major_is_placed_by_its_numbering(
        tmp_path: Path) -> None:
    lib = "usr/lib/x86_64-linux-gnu"
    members = [member(f"{lib}/libcudart.so.11.8.89", b"x"),
               member(f"{lib}/libcupti.so.2025.1.1", b"x")]
    layer = scan(tmp_path, tar_bytes(members))
    verdict = judge(ref="r", image=image(), scans=[layer], expect=CUDA128)
    status = {f.path.rsplit("/", 1)[-1]: f.status for f in verdict.findings}
    assert status == {"libcudart.so.11.8.89": VIOLATION, "libcupti.so.2025.1.1": WARNING}


def test_a_link_that_only_shortens_its_targets_name_adds_nothing(tmp_path: Path) -> None:
    """Debian's libcudart.so.11.0 -> libcudart.so.11.8.89: the file is judged once."""
    lib = "usr/lib/x86_64-linux-gnu"
    members = [member(f"{lib}/libcudart.so.11.8.89", b"x"),
               member(f"{lib}/libcudart.so.11.0", kind=tarfile.SYMTYPE,
                      link="libcudart.so.11.8.89"),
               member(f"{lib}/libcudart.so.12.8.90", kind=tarfile.SYMTYPE,
                      link="libcudart.so.11.8.89")]
    layer = scan(tmp_path, tar_bytes(members))
    paths = sorted(e.path.rsplit("/", 1)[-1] for e in layer.evidence)
    assert paths == ["libcudart.so.11.8.89", "libcudart.so.12.8.90"]
