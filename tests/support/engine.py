"""The real engine's view of generated layers: packed into an OCI layout, copied by skopeo
into containers-storage (which unpacks them as podman and buildah do), exposed by
`buildah from` + `buildah mount`, read back file for file, then removed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Union

from aipcc_build.imagefs.tar import BLOCKDEV, CHARDEV, DIRECTORY, FIFO, REGULAR, SYMLINK
from aipcc_build.imagefs.tree import Entry

TIMEOUT = 120
LAYER = "application/vnd.oci.image.layer.v1.tar"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=TIMEOUT)


def layout(root: Path, layers: Sequence[bytes]) -> str:
    """An OCI layout of one image of uncompressed LAYERS, media types and all (skopeo
    refuses a manifest without them)."""
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes, media_type: str) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    descriptors = [put(data, LAYER) for data in layers]
    config = json.dumps({"os": "linux", "architecture": "amd64", "config": {},
                         "rootfs": {"type": "layers",
                                    "diff_ids": [d["digest"] for d in descriptors]}})
    manifest = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST,
                           "config": put(config.encode(), CONFIG), "layers": descriptors})
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (root / "index.json").write_text(json.dumps(
        {"schemaVersion": 2, "manifests": [put(manifest.encode(), MANIFEST)]}))
    return f"oci:{root}"


def mounted_tree(mount: str) -> dict[str, Entry]:
    """Every path under MOUNT as the tree model writes it."""
    tree: dict[str, Entry] = {}
    for directory, subdirectories, files in os.walk(mount):
        for name in subdirectories + files:
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                # overlayfs lists a whiteout of the lowest layer, which hides nothing, but
                # no process can open it: absent, as the model has it.
                continue
            where = "/" + os.path.relpath(path, mount)
            mode = info.st_mode & 0o7777
            if stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                tree[where] = Entry(REGULAR, mode, digest)
            elif stat.S_ISLNK(info.st_mode):
                tree[where] = Entry(SYMLINK, 0o777, None, os.readlink(path))
            else:
                kind = (DIRECTORY if stat.S_ISDIR(info.st_mode) else FIFO
                        if stat.S_ISFIFO(info.st_mode) else CHARDEV
                        if stat.S_ISCHR(info.st_mode) else BLOCKDEV)
                tree[where] = Entry(kind, mode)
    return tree


@contextlib.contextmanager
def stored(layers: Sequence[bytes], workdir: Path) -> Iterator[Union[str, Refused]]:
    """LAYERS copied by skopeo into containers-storage as an image (its name), or why the
    engine refused them; the image is removed afterwards."""
    root = workdir / uuid.uuid4().hex[:12]
    image = f"localhost/aipcc-differential-{uuid.uuid4().hex[:12]}:t"
    try:
        copied = _run("skopeo", "copy", "--quiet", layout(root, layers),
                      f"containers-storage:{image}")
        if copied.returncode:
            yield Refused(copied.stderr.strip().splitlines()[-1] if copied.stderr.strip()
                          else "refused")
        else:
            yield image
    finally:
        _run("buildah", "rmi", "-f", image)


class Refused(str):
    """Why the engine refused an image's layers."""


def image_tree(image: str) -> dict[str, Entry]:
    """The final filesystem of IMAGE in containers-storage, through buildah from + mount."""
    container = ""
    try:
        made = _run("buildah", "from", "--pull-never", image)
        assert made.returncode == 0, made.stderr
        container = made.stdout.strip().splitlines()[-1]
        mounted = _run("buildah", "mount", container)
        assert mounted.returncode == 0, mounted.stderr
        try:
            return mounted_tree(mounted.stdout.strip())
        finally:
            _run("buildah", "umount", container)
    finally:
        if container:
            _run("buildah", "rm", container)


def engine_tree(layers: Sequence[bytes], workdir: Path) -> Union[dict[str, Entry], str]:
    """The final filesystem the engine unpacks from LAYERS, or why it refused them."""
    with stored(layers, workdir) as image:
        return str(image) if isinstance(image, Refused) else image_tree(image)
