"""Issue 16 figures under hostile input.

Run: python bench/hostile.py [push|symlinks|spool] [PUSH_TIMEOUT] [RETRIES]  (default: all;
PUSH_TIMEOUT 5, RETRIES 1)

- push: how long `aipcc-build matrix --push` takes to end against a registry that accepts
  connections and never answers (it used to hang forever). Expected: about PUSH_TIMEOUT *
  (RETRIES + 1) + the build, and exit 1 (push-failed).
- symlinks: the validator's scan of layers that are one chain of symlinks, 10 KB and 10 MB
  of tar (and the same chains gzip'd, and a 10 KB gzip'd blob), and of one link whose
  target has 80,000 components (two minutes before the bound): time per MB of tar stays
  flat (linear).
- spool: peak temporary disk of a layer scan whose RPM databases want more than the bound
  (1 GiB): a 400 MB database three times at one path, then a 700 MB one at the other.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import REPO, as_installed, remove_images, write_matrix

BASE = "localhost/aipcc-demo/busybox:latest"


def silent_registry() -> tuple[socket.socket, list[socket.socket]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return server, held


def push(timeout: float, retries: int) -> None:
    server, held = silent_registry()
    port = server.getsockname()[1]
    namespace = f"127.0.0.1:{port}/hostile"
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        write_matrix(root, (
            "schema: 1\nproduct: {name: h, version: '1'}\nregistry: " + namespace + "\n"
            f"os:\n  bb: {{from: {BASE}}}\n"
            "accelerators:\n  cuda:\n    versions:\n      - {version: 12.8.1}\n"
            "images:\n  base: {template: base.j2, os: [bb]}\n"),
            {"base.j2": "FROM {{ os_from }}\nLABEL hostile=1\n"})
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "aipcc_build", "--matrix", "matrix/bench.yaml", "matrix",
             "--push", "--tls-verify", "false", "--push-timeout", str(timeout),
             "--retries", str(retries)],
            cwd=root, env={**as_installed(), "CI": "1"}, capture_output=True, text=True,
            timeout=timeout * (retries + 1) + 600)
        elapsed = time.monotonic() - start
        report = json.loads((root / "build-report.json").read_text())
    server.close()
    for connection in held:
        connection.close()
    remove_images(namespace)
    (image,) = report["images"]
    print(f"matrix --push to a silent registry: ended after {elapsed:.1f} s "
          f"(push_timeout {timeout:g} s x {retries + 1} attempts), exit {done.returncode}, "
          f"status {image['status']}")


def _scan(blob: bytes) -> tuple[float, object]:
    import hashlib

    from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
    from aipcc_build.validate.layers import scan_layer

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "layer"
        path.write_bytes(blob)
        start = time.perf_counter()
        scan = scan_layer(LayerJob("sha256:" + hashlib.sha256(blob).hexdigest(), "",
                                   BlobLocation(str(path))))
        return time.perf_counter() - start, scan


def _symlink_tar(size: int) -> bytes:
    """A tar of SIZE bytes (about) that is one chain of symlinks l/0 -> 1 -> 2 ..."""
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for number in range(max(1, size // 512 - 3)):
            info = tarfile.TarInfo(f"l/{number}")
            info.type, info.linkname = tarfile.SYMTYPE, str(number + 1)
            tar.addfile(info)
    return out.getvalue()


def symlinks() -> None:
    import tarfile

    sys.path.insert(0, str(REPO))
    for label, size in (("10 KB", 10_000), ("10 MB", 10_000_000)):
        tar = _symlink_tar(size)
        for form, blob in (("tar", tar), ("tar.gz", gzip.compress(tar, 6))):
            seconds, scan = _scan(blob)
            kinds = {h.kind for h in scan.hazards}  # type: ignore[attr-defined]
            print(f"symlink chain, {label} of tar as {form} ({len(blob) / 1e3:.1f} KB, "
                  f"{scan.entries} links): {seconds:.2f} s, "  # type: ignore[attr-defined]
                  f"{seconds / (len(tar) / 1e6):.2f} s per MB of tar, "
                  f"{'symlink-bound' if 'symlink-bound' in kinds else 'within the budget'}")
    tar = _symlink_tar(1100 * 512)  # gzip'd, a 10 KB blob
    blob = gzip.compress(tar, 6)
    seconds, scan = _scan(blob)
    print(f"symlink chain, a {len(blob) / 1e3:.1f} KB tar.gz blob ({scan.entries} links): "  # type: ignore[attr-defined]
          f"{seconds:.2f} s")
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("x")
        info.type, info.linkname = tarfile.SYMTYPE, "a/" * 80_000
        tar.addfile(info)
    seconds, _ = _scan(out.getvalue())
    print(f"one link to a target of 80,000 components: {seconds:.2f} s")


def spool() -> None:
    import tarfile

    sys.path.insert(0, str(REPO))
    from aipcc_build.validate.detect import SPOOL_LIMIT

    class Zeros(io.RawIOBase):
        def __init__(self, size: int) -> None:
            self.left = size

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
            count = min(len(buffer), self.left)
            buffer[:count] = bytes(count)
            self.left -= count
            return count

    members = [("var/lib/rpm/rpmdb.sqlite", 400 << 20)] * 3 + \
        [("usr/lib/sysimage/rpm/rpmdb.sqlite", 700 << 20)]
    with tempfile.TemporaryDirectory() as scratch:
        blob = Path(scratch) / "layer.tar.gz"
        with gzip.open(blob, "wb", compresslevel=1) as out, \
                tarfile.open(fileobj=out, mode="w") as tar:
            for name, size in members:
                info = tarfile.TarInfo(name)
                info.size = size
                tar.addfile(info, io.BufferedReader(Zeros(size)))
        spool_dir = Path(scratch) / "tmp"
        spool_dir.mkdir()
        os.environ["TMPDIR"] = str(spool_dir)
        tempfile.tempdir = None
        peak = 0
        done = threading.Event()

        def watch() -> None:
            nonlocal peak
            while not done.is_set():
                used = sum(f.stat().st_size for f in spool_dir.rglob("*") if f.is_file())
                peak = max(peak, used)
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        seconds, scan = _scan(blob.read_bytes())
        done.set()
        watcher.join()
    refused = [h.path for h in scan.hazards if h.kind == "spool-limit"]  # type: ignore[attr-defined]
    print(f"RPM databases of {sum(size for _, size in members) >> 20} MiB in one layer: "
          f"peak temporary disk {peak >> 20} MiB (bound {SPOOL_LIMIT >> 20} MiB), "
          f"{seconds:.1f} s, refused: {', '.join(refused) or 'none'}")


def main() -> None:
    args = sys.argv[1:]
    which = args.pop(0) if args and not args[0][0].isdigit() else "all"
    if which in ("all", "symlinks"):
        symlinks()
    if which in ("all", "spool"):
        spool()
    if which in ("all", "push"):
        push(float(args[0]) if args else 5.0, int(args[1]) if len(args) > 1 else 1)


if __name__ == "__main__":
    main()
