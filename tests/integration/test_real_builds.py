"""The readers of issue 29 on the real files (no image): ONNX Runtime's ROCm provider
library read from its start only as far as its dynamic section, TensorFlow's build record,
Debian's CUDA 11.8 and ROCm 5.2 package versions, bitsandbytes' backends. The files come
from PyPI (their members only, by range requests) and Debian's archive, cached once."""

from __future__ import annotations

import subprocess
import zipfile

import pytest

from aipcc_build.validate.builds import backend, linked_evidence
from aipcc_build.validate.detect import WANT_MEMORY, LayerDetector
from aipcc_build.validate.elf import dynamic_entries
from aipcc_build.validate.packages import package_evidence
from tests.support.partial_wheels import debian_packages, partial_wheel

pytestmark = pytest.mark.integration

SITE = "/opt/venv/lib/python3.11/site-packages"
PROVIDER = "onnxruntime/capi/libonnxruntime_providers_rocm.so"
BUILD_INFO = "tensorflow/python/platform/build_info.py"
DEBS = ["libcudart11.0", "libcufftw10", "libnvtoolsext1", "libamdhip64-5"]


def test_a_rocm_provider_says_its_release_in_its_dynamic_section_only() -> None:
    wheel = partial_wheel("onnxruntime-rocm", "1.22.2.post3", "cp311-cp311-manylinux*x86_64",
                          [PROVIDER, "onnxruntime/capi/build_and_package_info.py"])
    with zipfile.ZipFile(wheel) as archive, archive.open(PROVIDER) as provider:
        size = archive.getinfo(PROVIDER).file_size
        entries = dynamic_entries(provider.read)
        read = provider.tell()
        record = archive.read("onnxruntime/capi/build_and_package_info.py")
    assert entries is not None and "libamdhip64.so.7" in entries.needed
    assert "/opt/rocm-7.2.4/lib" in entries.search_path
    assert read < size // 10  # 14.5 MB of 513 MB
    [evidence] = linked_evidence(f"{SITE}/{PROVIDER}", entries, "onnxruntime")
    assert (evidence.toolkit, evidence.release, evidence.built) == ("rocm", "7.2", True)
    assert b"rocm_version" not in record and b"cuda_version" not in record  # no other trace


def test_tensorflows_build_record_as_its_wheel_writes_it() -> None:
    wheel = partial_wheel("tensorflow", "2.21.0", "cp311-cp311-manylinux*x86_64", [BUILD_INFO])
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(BUILD_INFO)
    detector = LayerDetector()
    path = f"{SITE}/{BUILD_INFO}"
    assert detector.visit(path, "0", len(text)) == WANT_MEMORY
    detector.content(path, text)
    evidence, _, hazards = detector.finish()
    assert [(e.kind, e.toolkit, e.version, e.release, e.built) for e in evidence] == [
        ("build-info", "cuda", "12.5.1", "12.5", True)]
    assert hazards == []


def test_debians_cuda_11_8_and_rocm_5_2_package_versions() -> None:
    debs = debian_packages(DEBS)
    found = {}
    for name in DEBS:
        [deb] = debs.glob(f"{name}_*.deb")
        version = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True,
                                 capture_output=True, text=True, timeout=60).stdout.strip()
        source = subprocess.run(["dpkg-deb", "-f", str(deb), "Source"], check=True,
                                capture_output=True, text=True, timeout=60).stdout.strip()
        evidence = package_evidence("dpkg", "/var/lib/dpkg/status", name, version, source)
        assert evidence is not None, name
        found[name] = (evidence.toolkit, evidence.release)
    assert found == {"libcudart11.0": ("cuda", "11.8"), "libcufftw10": ("cuda", "11.8"),
                     "libnvtoolsext1": ("cuda", "11.8"), "libamdhip64-5": ("rocm", "5.2")}


def test_bitsandbytes_backends_by_their_names() -> None:
    wheel = partial_wheel("bitsandbytes", "0.50.2", "py3-none-manylinux*x86_64", [])
    with zipfile.ZipFile(wheel) as archive:
        record = archive.read("bitsandbytes-0.50.2.dist-info/RECORD").decode()
    libraries = [line.split(",")[0] for line in record.splitlines()
                 if line.startswith("bitsandbytes/libbitsandbytes_")]
    named = {backend(f"{SITE}/{path}") for path in libraries}
    assert {("cpu", None), ("cuda", "11.8"), ("cuda", "12.8"), ("cuda", "13.2"),
            ("rocm", "6.4"), ("rocm", "7.2")} <= named


def test_torchs_version_file_as_its_wheel_writes_it() -> None:
    wheel = partial_wheel("torch", "2.8.0", "cp311-cp311-manylinux*x86_64",
                          ["torch/version.py"])
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read("torch/version.py")
    detector = LayerDetector()
    path = f"{SITE}/torch/version.py"
    assert detector.visit(path, "0", len(text)) == WANT_MEMORY
    detector.content(path, text)
    evidence, _, _ = detector.finish()
    assert [(e.kind, e.toolkit, e.release, e.built) for e in evidence] == [
        ("torch-version", "cuda", "12.8", True)]
