"""Real images for the validator's integration tests, built once per session with buildah.

Each image is a chain of `buildah from` / `buildah commit` steps, one layer per step, so a
test can name the layer that brought a file in. Every name starts with the test prefix
and carries a per-session suffix; the session removes exactly the images it created.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import struct
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from artifacts import wheel  # noqa: F401  (used by the tests through this module)

PREFIX = "localhost/aipcc-test-validator"
SITE = "/usr/lib/python3.9/site-packages"
SESSION = uuid.uuid4().hex[:8]
CUDA128_ENV = {
    "CUDA_VERSION": "12.8.1",
    "NV_CUDA_LIB_VERSION": "12.8.1-1",
    "NVIDIA_REQUIRE_CUDA": "cuda>=12.8 brand=tesla,driver>=535,driver<536",
    "FROMAGER_VARIANT": "cuda-ubi9",
}
CUDA128_LABELS = {"ai.aipcc.accelerator": "cuda", "ai.aipcc.accelerator.version": "12.8.1"}


def run(*argv: str) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    return done.stdout.strip()


@dataclass
class Step:
    """One layer: files to add, then a shell command run inside the container."""

    add: Sequence[tuple[Path, str]] = ()
    script: str = ""
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    volumes: Sequence[tuple[Path, str]] = ()  # read-only bind mounts for the script


class Images:
    """Builds and remembers the session's images; removes them at the end."""

    def __init__(self) -> None:
        self.created: list[str] = []

    def name(self, short: str) -> str:
        return f"{PREFIX}/{short}:{SESSION}"

    def build(self, short: str, base: str, steps: Sequence[Step]) -> str:
        current = base
        for number, step in enumerate(steps):
            ctr = run("buildah", "from", "--pull-never", current)
            try:
                for source, dest in step.add:
                    run("buildah", "add", ctr, str(source), dest)
                if step.script:
                    mounts = [f"--volume={source}:{dest}:ro" for source, dest in step.volumes]
                    run("buildah", "run", *mounts, ctr, "--", "sh", "-euc", step.script)
                config = [f"--env={k}={v}" for k, v in step.env.items()]
                config += [f"--label={k}={v}" for k, v in step.labels.items()]
                if config:
                    run("buildah", "config", *config, ctr)
                target = (self.name(short) if number == len(steps) - 1
                          else self.name(f"{short}-step{number}"))
                run("buildah", "commit", "--quiet", "--rm", ctr, target)
            except BaseException:
                subprocess.run(["buildah", "rm", ctr], capture_output=True)
                raise
            self.created.append(target)
            current = target
        return current

    def remove_all(self) -> None:
        for image in reversed(self.created):
            # A manifest list is removed with `manifest rm`; `rmi` refuses it.
            if subprocess.run(["buildah", "manifest", "rm", image],
                              capture_output=True).returncode != 0:
                subprocess.run(["buildah", "rmi", image], capture_output=True)


@pytest.fixture(scope="session")
def images(base_image: str) -> Iterator[Images]:
    built = Images()
    try:
        yield built
    finally:
        built.remove_all()


def unzip_script(wheels: Sequence[str]) -> str:
    return " && ".join(f"unzip -q -o /tmp/{w} -d {SITE} && rm /tmp/{w}" for w in wheels)


def version_json(release: str) -> str:
    return json.dumps({"cuda": {"name": "CUDA SDK", "version": release}})


def rpmdb(path: Path, packages: Sequence[tuple[str, str, str]]) -> Path:
    """An rpm sqlite database as RHEL 9's rpm writes it: Packages blobs and a Name index."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY AUTOINCREMENT, blob BLOB)")
    conn.execute("CREATE TABLE Name (key TEXT, hnum INTEGER, idx INTEGER)")
    for name, version, release in packages:
        data = b""
        entries = b""
        for tag, value in ((1000, name), (1001, version), (1002, release)):
            entries += struct.pack(">iiii", tag, 6, len(data), 1)
            data += value.encode() + b"\0"
        blob = struct.pack(">II", 3, len(data)) + entries + data
        cursor = conn.execute("INSERT INTO Packages (blob) VALUES (?)", (blob,))
        conn.execute("INSERT INTO Name VALUES (?, ?, 0)", (name, cursor.lastrowid))
    conn.commit()
    conn.close()
    return path


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


def _on_cuda128(images: Images, cuda128: str, short: str, step: Step) -> str:
    return images.build(short, cuda128, [step])


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


def export(ref: str, dest: str, *extra: str) -> str:
    run("skopeo", "copy", "--quiet", *extra, f"containers-storage:{ref}", dest)
    return dest


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def append_layer(layout: Path, layer: bytes) -> None:
    """Add an uncompressed layer on top of the single image of an OCI layout, in place."""
    def blob(digest: str) -> Path:
        return layout / "blobs" / "sha256" / digest.split(":", 1)[1]

    def put(data: bytes) -> str:
        digest = sha256(data)
        blob(digest).write_bytes(data)
        return digest

    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads(blob(index["manifests"][0]["digest"]).read_text())
    config = json.loads(blob(manifest["config"]["digest"]).read_text())
    digest = put(layer)
    config["rootfs"]["diff_ids"].append(digest)
    manifest["layers"].append({"mediaType": "application/vnd.oci.image.layer.v1.tar",
                               "digest": digest, "size": len(layer)})
    config_bytes = json.dumps(config).encode()
    manifest["config"] = {**manifest["config"], "digest": put(config_bytes),
                          "size": len(config_bytes)}
    manifest_bytes = json.dumps(manifest).encode()
    index["manifests"][0] = {**index["manifests"][0], "digest": put(manifest_bytes),
                             "size": len(manifest_bytes)}
    (layout / "index.json").write_text(json.dumps(index))


def tar_bytes(members: Sequence[tuple[tarfile.TarInfo, bytes]],
              fmt: int = tarfile.PAX_FORMAT) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data else None)
    return out.getvalue()


def member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, link: str = "",
           size: int | None = None) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.size = len(data) if size is None else size
    info.mode = 0o644
    return info, data


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
