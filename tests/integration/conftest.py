"""Fixtures of the integration tests: real images built once per session with buildah
(the validator's), per-test base images and registry namespaces (the scheduler's)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from tests.support.artifacts import wheel
from tests.support.layers import (
    CUDA128_ENV,
    CUDA128_LABELS,
    SITE,
    Images,
    Step,
    _on_cuda128,
    buildah_json,
    rpmdb,
    unzip_script,
    version_json,
)
from tests.support.publish import (
    MATRIX,
    PASSWORD,
    USER,
    build_image,
    make_registry,
    push,
)
from tests.support.registry import Registry


@pytest.fixture(scope="session")
def images(base_image: str) -> Iterator[Images]:
    built = Images()
    try:
        yield built
    finally:
        built.remove_all()


@pytest.fixture(scope="session")
def cuda128(images: Images, base_image: str, wheelhouse: Path) -> str:
    """A clean CUDA 12.8 image: 12.8 wheels, a /usr/local/cuda-12.8 tree, matching config."""
    runtime = wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.8.90")
    nvtx = wheel(wheelhouse, "nvidia-nvtx-cu12", "12.8.90")
    script = unzip_script([runtime.name, nvtx.name]) + (
        " && mkdir -p /usr/local/cuda-12.8/lib64"
        f" && cp {SITE}/nvidia/cuda_runtime/lib/libcudart.so.12"
        " /usr/local/cuda-12.8/lib64/libcudart.so.12.8.90"
        " && ln -s libcudart.so.12.8.90 /usr/local/cuda-12.8/lib64/libcudart.so.12"
        " && mkdir -p /etc/alternatives"
        " && ln -s /usr/local/cuda-12.8 /etc/alternatives/cuda"
        " && ln -s /etc/alternatives/cuda /usr/local/cuda"
        f" && printf '%s' '{version_json('12.8.1')}' > /usr/local/cuda-12.8/version.json")
    step = Step(add=[(runtime, f"/tmp/{runtime.name}"), (nvtx, f"/tmp/{nvtx.name}")],
                script=script, env=CUDA128_ENV, labels=CUDA128_LABELS)
    return images.build("cuda128", base_image, [step])


@pytest.fixture(scope="session")
def mixed_wheel(images: Images, cuda128: str, wheelhouse: Path) -> str:
    """The classic failure: a later pip install brings a CUDA 12.9 runtime wheel."""
    runtime = wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.9.79")
    return _on_cuda128(images, cuda128, "mixed-wheel", Step(
        add=[(runtime, f"/tmp/{runtime.name}")], script=unzip_script([runtime.name])))


@pytest.fixture(scope="session")
def whiteout(images: Images, mixed_wheel: str) -> str:
    """The 12.9 wheel removed again by a later layer: shipped bytes, absent from the result."""
    return images.build("whiteout", mixed_wheel, [Step(
        script=f"rm -rf {SITE}/nvidia_cuda_runtime_cu12-12.9.79.dist-info")])


@pytest.fixture(scope="session")
def torch129(images: Images, cuda128: str) -> str:
    dist = f"{SITE}/torch-2.8.0+cu129.dist-info"
    return _on_cuda128(images, cuda128, "torch129", Step(script=(
        f"mkdir -p '{dist}' {SITE}/torch"
        f" && printf 'Metadata-Version: 2.1\\nName: torch\\nVersion: 2.8.0+cu129\\n'"
        f" > '{dist}/METADATA'"
        f" && printf \"__version__ = '2.8.0+cu129'\\ncuda = '12.9'\\nhip = None\\n\""
        f" > {SITE}/torch/version.py")))


@pytest.fixture(scope="session")
def tree129(images: Images, cuda128: str, wheelhouse: Path) -> str:
    """Versioned /usr/local/cuda-12.9 files (real libcudart bytes of the 12.9 wheel)."""
    runtime = wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.9.79")
    lib = "/usr/local/cuda-12.9/targets/x86_64-linux/lib"
    return _on_cuda128(images, cuda128, "tree129", Step(
        add=[(runtime, f"/tmp/{runtime.name}")],
        script=(f"mkdir -p {lib} /tmp/w && unzip -q /tmp/{runtime.name} -d /tmp/w"
                f" && cp /tmp/w/nvidia/cuda_runtime/lib/libcudart.so.12 {lib}/libcudart.so.12.9.79"
                f" && rm -rf /tmp/w /tmp/{runtime.name}")))


@pytest.fixture(scope="session")
def packages(images: Images, cuda128: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """RPM and dpkg databases: a cuBLAS 12.9 RPM and an NCCL built for CUDA 12.9."""
    work = tmp_path_factory.mktemp("packages")
    db = rpmdb(work / "rpmdb.sqlite", [
        ("cuda-cudart-12-8", "12.8.90", "1"),
        ("libcublas-12-9", "12.9.1.4", "1"),
        ("libnccl", "2.27.3", "1+cuda12.9"),
        ("bash", "5.1.8", "9.el9"),
    ])
    status = work / "status"
    status.write_text(
        "Package: cuda-nvrtc-12-8\nStatus: install ok installed\nVersion: 12.8.93-1\n\n"
        "Package: cuda-nvtx-12-9\nStatus: deinstall ok config-files\nVersion: 12.9.79-1\n\n")
    return _on_cuda128(images, cuda128, "packages", Step(
        add=[(db, "/var/lib/rpm/rpmdb.sqlite"), (status, "/var/lib/dpkg/status")]))


@pytest.fixture(scope="session")
def rocm_mixed(images: Images, base_image: str) -> str:
    """ROCm 6.3 and 6.4 side by side (file names and version files as AMD's packages lay out)."""
    def tree(version: str, hip: str) -> str:
        return (f"mkdir -p /opt/rocm-{version}/.info /opt/rocm-{version}/lib"
                f" && echo {version}-120 > /opt/rocm-{version}/.info/version"
                f" && echo elf > /opt/rocm-{version}/lib/libamdhip64.so.{hip}")
    return images.build("rocm-mixed", base_image, [
        Step(script=tree("6.3.4", "6.3.42134")),
        Step(script=tree("6.4.1", "6.4.43483"), env={"ROCM_VERSION": "6.4.1"},
             labels={"ai.aipcc.accelerator": "rocm", "ai.aipcc.accelerator.version": "6.4.1"}),
    ])


@pytest.fixture(scope="session")
def cpu_with_cuda(images: Images, base_image: str, wheelhouse: Path) -> str:
    runtime = wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.8.90")
    return images.build("cpu-with-cuda", base_image, [Step(
        add=[(runtime, f"/tmp/{runtime.name}")], script=unzip_script([runtime.name]),
        labels={"ai.aipcc.accelerator": "cpu"}, env={"FROMAGER_VARIANT": "cpu-ubi9"})])


@pytest.fixture(scope="session")
def curand128(images: Images, base_image: str, wheelhouse: Path) -> str:
    """cuRAND has its own numbering (10.3.9.90 ships with CUDA 12.8)."""
    curand = wheel(wheelhouse, "nvidia-curand-cu12", "10.3.9.90")
    return images.build("curand128", base_image, [Step(
        add=[(curand, f"/tmp/{curand.name}")], script=unzip_script([curand.name]),
        labels=CUDA128_LABELS)])


@pytest.fixture
def no_tmp_leaks(tmp_path: Path) -> Iterator[Path]:
    """Run with TMPDIR inside tmp_path; yields the directory, checks it is empty after."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = None
    try:
        yield tmp
    finally:
        if old is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = old
        tempfile.tempdir = None
    assert list(tmp.iterdir()) == [], "the validator left temporary files behind"


@pytest.fixture
def unique_base(base_image: str) -> Iterator[tuple[str, str]]:
    """(name, image ID) of a base image only this test uses."""
    tag = uuid.uuid4().hex[:10]
    name = f"localhost/aipcc-test-sched/base-{tag}"
    subprocess.run(["buildah", "build", "-q", "-t", name, "-f", "-", "."],
                   input=f"FROM {base_image}\nLABEL aipcc-test-sched={tag}\n", text=True,
                   check=True, capture_output=True)
    image_id = subprocess.run(["buildah", "inspect", "--type", "image", "--format",
                               "{{.FromImageID}}", name],
                              check=True, capture_output=True, text=True).stdout.strip()
    yield name, image_id
    subprocess.run(["buildah", "rmi", "-f", name], capture_output=True)


@pytest.fixture
def namespace(registry: Any) -> Iterator[str]:
    """HOST/NAMESPACE for --registry; the images tagged under it are removed afterwards."""
    prefix = f"{registry.host}/t{uuid.uuid4().hex[:10]}"
    yield prefix
    ours = [image["id"] for image in buildah_json("images")
            if any(name.startswith(prefix + "/") for name in image.get("names") or [])]
    if ours:
        subprocess.run(["buildah", "rmi", "-f", *ours], capture_output=True)


# ---- promote and mirror: two registries, one with htpasswd authentication ----

@pytest.fixture
def registries(tmp_path: Path) -> Iterator[dict[str, Registry]]:
    """`src` (open) and `dst` (htpasswd: USER / PASSWORD)."""
    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(5)).decode()}\n")
    regs = {"src": make_registry(tmp_path / "src"),
            "dst": make_registry(tmp_path / "dst", htpasswd)}
    try:
        yield regs
    finally:
        for reg in regs.values():
            reg.stop()


@pytest.fixture
def authfile(tmp_path: Path, registries: dict[str, Registry]) -> Path:
    path = tmp_path / "auth.json"
    subprocess.run(["skopeo", "login", "--authfile", str(path), "--tls-verify=false",
                    "--username", USER, "--password-stdin", registries["dst"].host],
                   input=PASSWORD, text=True, check=True, capture_output=True)
    return path


@pytest.fixture
def release(tmp_path: Path, registries: dict[str, Registry],
            base_image: str) -> Iterator[dict[str, Any]]:
    """N images pushed to src/ns/base-images/NAME:3.0-42 and a report of them."""
    ns = f"{registries['src'].host}/aipcc"
    tag = uuid.uuid4().hex[:8]
    names, entries = [], []
    for index in range(3):
        local = f"localhost/aipcc-test-release/img{index}-{tag}"
        build_image(base_image, local, f"{tag}-{index}")
        names.append(local)
        reference = f"{ns}/base-images/img{index}:3.0-42"
        entries.append({"name": f"img{index}", "key": f"base/img{index}", "kind": "base",
                        "reference": reference, "status": "ok",
                        "digest": push(local, reference)})
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({"schema": 1, "build_id": "42", "images": entries}))
    project = tmp_path / "project"
    (project / "templates").mkdir(parents=True)
    (project / "templates" / "base.j2").write_text("FROM {{ from }}\n")
    (project / "matrix.yaml").write_text(MATRIX.format(registry=ns))
    try:
        yield {"report": report, "entries": entries, "ns": ns, "names": names,
               "matrix": project / "matrix.yaml"}
    finally:
        subprocess.run(["buildah", "rmi", "-f", *names], capture_output=True)
