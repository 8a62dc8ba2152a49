"""Small file systems for the cases a disk gives: full, read-only. Mounted in a temporary
directory (root only: the suite runs as root for buildah) and unmounted on exit."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "1m", read_only: bool = False) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True,
                   timeout=30)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True, timeout=30)


@contextlib.contextmanager
def full_tmpfs(where: Path) -> Iterator[Path]:
    """A tmpfs with no block left (an empty file still fits: the inodes are not used up)."""
    with tmpfs(where, "256k") as mount:
        with open(mount / "filler", "wb", buffering=0) as filler, \
                contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 4096)
        yield mount


def device_node(where: Path) -> Path:
    """A character device like /dev/null (1:3), made in WHERE: never the host's."""
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    node = where / "null"
    os.mknod(node, 0o666 | 0o020000, os.makedev(1, 3))
    return node
