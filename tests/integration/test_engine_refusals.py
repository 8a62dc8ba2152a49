"""Issue 37 item 3, against the real engine: crafted layers (numeric header fields as Go
parses them, checksums, the end of the archive, compression by magic, bytes after the
compressed stream, zstd windows) are copied by skopeo into containers-storage, which
unpacks them as podman and buildah do; the scan refuses exactly the layers the engine
refuses, and its model holds the files the engine writes where the engine writes them."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
from aipcc_build.imagefs.tree import layer_tree
from aipcc_build.validate.layers import REFUSED, scan_layer
from tests.support.engine import CONFIG, MANIFEST, mounted_tree
from tests.support.raw_tar import Member, header, raw_tar

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("buildah"),
                       reason="unpacks into the root containers-storage with buildah"),
]

TIMEOUT = 120
GZIP_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
AFTER = raw_tar([Member(b"after", data=b"next")])


def resum(block: bytearray, signed: bool = False) -> bytes:
    block[148:156] = b" " * 8
    total = sum(b - 256 if signed and b >= 128 else b for b in block)
    block[148:156] = b"%06o\0 " % total
    return bytes(block)


def with_field(start: int, value: bytes, name: bytes = b"f", **kwargs: object) -> bytes:
    """A member NAME holding b"hello", one header field replaced by VALUE, then "after"."""
    block = bytearray(header(name, size=5, **kwargs))  # type: ignore[arg-type]
    block[start:start + len(value)] = value
    return resum(block) + b"hello".ljust(512, b"\0") + AFTER


def zstd_window(data: bytes, window_log: int) -> bytes:
    params = zstandard.ZstdCompressionParameters(window_log=window_log)
    out = io.BytesIO()
    with zstandard.ZstdCompressor(compression_params=params).stream_writer(
            out, closefd=False) as writer:  # no content size: the window is as declared
        writer.write(data)
    return out.getvalue()


def cut(compress: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    def half(data: bytes) -> bytes:
        blob = compress(data + os.urandom(30000))
        return blob[:len(blob) // 2]
    return half


TAR = raw_tar([Member(b"usr/local/cuda-12.8/version.json", data=b"12.8\n")])
PLAIN = "plain"
# name -> (the tar, how it is compressed, whether the engine unpacks it)
CASES: dict[str, tuple[bytes, Callable[[bytes], bytes], bool]] = {
    "size-full-width-octal": (with_field(124, b"000000000005"), bytes, True),
    "size-base-256": (with_field(124, b"\x80" + bytes(10) + b"\x05"), bytes, True),
    "size-base-256-negative": (with_field(124, b"\xff" * 11 + b"\xfb"), bytes, False),
    "size-with-a-base-prefix": (with_field(124, b"0o0000000005"), bytes, False),
    "mode-with-an-inner-space": (with_field(100, b"0644 644"), bytes, False),
    "pax-size-plus": (raw_tar([Member(b"f", data=b"abc", pax={"size": b"+3"})]), bytes, True),
    "pax-size-minus": (raw_tar([Member(b"f", data=b"abc", pax={"size": b"-3"})]), bytes,
                       False),
    "pax-mtime-malformed": (raw_tar([Member(b"f", data=b"abc", pax={"mtime": b".5"})]),
                            bytes, False),
    "checksum-wrong": (TAR[:148] + b"7" + TAR[149:], bytes, False),
    "checksum-signed": (resum(bytearray(header(b"caf\xc3\xa9"))) + AFTER, bytes, True),
    "one-zero-block-then-a-member": (
        raw_tar([Member(b"a", data=b"1")], end=False) + bytes(512) + AFTER, bytes, False),
    "one-zero-block-then-the-end": (
        raw_tar([Member(b"a", data=b"1")], end=False) + bytes(512), bytes, True),
    "global-header": (raw_tar([Member(b"g", b"g", data=b"6 a=b\n"), Member(b"f", data=b"1")]),
                      bytes, True),
    "global-header-malformed": (
        raw_tar([Member(b"g", b"g", data=b"99 a=b\n"), Member(b"f", data=b"1")]), bytes, False),
    "gnu-times-that-are-a-prefix": (with_field(345, b"prefix", gnu=True), bytes, True),
    "gzip-members": (TAR, lambda d: gzip.compress(d[:512]) + gzip.compress(d[512:]), True),
    "gzip-then-zeros": (TAR, lambda d: gzip.compress(d) + bytes(16), False),
    "gzip-then-garbage": (TAR, lambda d: gzip.compress(d) + b"garbage!", False),
    "xz-under-a-gzip-type": (TAR, lzma.compress, True),
    "bzip2-under-a-gzip-type": (TAR, bz2.compress, True),
    "xz-then-garbage": (TAR, lambda d: lzma.compress(d) + b"garbage!", False),
    "zstd-window-256-mib": (TAR, lambda d: zstd_window(d, 28), True),
    "zstd-cut-short": (TAR, cut(lambda d: zstandard.ZstdCompressor().compress(d)), False),
    # Where members land (`overlay.Unpacker`, the scan's placement since issue 37.1)
    "member-below-a-file": (raw_tar([Member(b"a", data=b"x"), Member(b"a/b", data=b"y")]),
                            bytes, False),
    "member-through-a-symlink-to-nothing": (
        raw_tar([Member(b"d", b"2", link=b"nowhere"), Member(b"d/f", data=b"1")]), bytes,
        False),
    "directory-replaced-before-its-times": (
        raw_tar([Member(b"x/y/", b"5"), Member(b"x", data=b"1")]), bytes, False),
    "member-through-a-chain-of-the-layer-s-symlinks": (
        raw_tar([Member(b"r/", b"5"), Member(b"b", b"2", link=b"r"),
                 Member(b"a", b"2", link=b"b"), Member(b"a/f", data=b"1")]), bytes, True),
}


def engine(tar: bytes, blob: bytes, workdir: Path) -> tuple[bool, set[str]]:
    """Whether skopeo copies the one-layer image into containers-storage, and the files
    buildah mounts when it does."""
    root = workdir / uuid.uuid4().hex[:12]
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes, media_type: str) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    config = {"os": "linux", "architecture": "amd64", "config": {}, "rootfs": {
        "type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(tar).hexdigest()}"]}}
    manifest = {"schemaVersion": 2, "mediaType": MANIFEST,
                "config": put(json.dumps(config).encode(), CONFIG),
                "layers": [put(blob, GZIP_LAYER)]}
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (root / "index.json").write_text(json.dumps(
        {"schemaVersion": 2, "manifests": [put(json.dumps(manifest).encode(), MANIFEST)]}))
    image = f"localhost/aipcc-refusals-{uuid.uuid4().hex[:12]}:t"

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)

    try:
        if run("skopeo", "copy", "--quiet", f"oci:{root}", f"containers-storage:{image}"
               ).returncode:
            return False, set()
        container = run("buildah", "from", "--pull-never", image).stdout.strip()
        try:
            mount = run("buildah", "mount", container).stdout.strip()
            return True, set(mounted_tree(mount))
        finally:
            run("buildah", "umount", container)
            run("buildah", "rm", container)
    finally:
        run("buildah", "rmi", "-f", image)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_scan_refuses_what_the_engine_refuses(tmp_path: Path, case: str) -> None:
    tar, compress, unpacked = CASES[case]
    blob = tar if compress is bytes else compress(tar)
    accepted, files = engine(tar, blob, tmp_path)
    assert accepted == unpacked, f"the engine {'took' if accepted else 'refused'} it"
    path = tmp_path / "blob"
    path.write_bytes(blob)
    job = LayerJob(f"sha256:{hashlib.sha256(blob).hexdigest()}", "", BlobLocation(str(path)))
    refused = [h.detail for h in scan_layer(job).hazards if h.kind == REFUSED]
    assert bool(refused) != accepted, refused
    if accepted:  # the files the model unpacks (where the scan puts them) are the engine's
        assert set(layer_tree(job)) - {"/"} == files
