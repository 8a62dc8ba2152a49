"""Building blocks of real images for the validator's tests: buildah steps one layer each,
hand-made tar members, an RPM database, and OCI layouts edited in place. Each image is a
chain of `buildah from` / `buildah commit` steps, so a test can name the layer that brought
a file in; every name starts with the test prefix and carries a per-session suffix."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import struct
import subprocess
import tarfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "localhost/aipcc-test-validate"


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


def _on_cuda128(images: Images, cuda128: str, short: str, step: Step) -> str:
    return images.build(short, cuda128, [step])


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


def oci_layout(root: Path, layers: Sequence[bytes], env: dict[str, str] | None = None,
               workdir: str = "") -> str:
    """An OCI layout of one image of uncompressed LAYERS (bottom first)."""
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return f"sha256:{digest}"

    digests = [put(data) for data in layers]
    config = json.dumps({"os": "linux", "architecture": "amd64",
                         "config": {"Env": [f"{k}={v}" for k, v in (env or {}).items()],
                                    "WorkingDir": workdir},
                         "rootfs": {"type": "layers", "diff_ids": digests}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": put(config)},
                           "layers": [{"digest": d, "size": 0} for d in digests]}).encode()
    (root / "index.json").write_text(json.dumps(
        {"schemaVersion": 2, "manifests": [{"digest": put(manifest)}]}))
    return f"oci:{root}"


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


def buildah_json(*args: str) -> Any:
    """`buildah ARGS --json`, parsed ([] when buildah prints nothing).

    Listing races with another process removing an image (buildah exits 125 when an image
    it listed is gone before it reads it): a second and third try see a settled store.
    """
    for attempt in range(3):
        done = subprocess.run(["buildah", *args, "--json"], capture_output=True, text=True)
        if done.returncode == 0 or attempt == 2:
            break
    done.check_returncode()
    return json.loads(done.stdout or "[]") or []
