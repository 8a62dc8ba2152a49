"""The cost of the safe writer's read-back and of its clean-up of killed writers'
temporaries (fsutil.output): CPU and wall seconds of writing through it over those of the bare
write-fsync-rename it was before, for many small outputs in one directory (an index
generation's metadata files), a few reports, and one large file (an archive); and the bytes
read back per byte written (1.00: each byte once, nothing twice).

Run: python bench/output_readback.py [--repeat N] [--dir DIR]   (DIR: where to write, by
default a temporary directory; give one on a disk, not a tmpfs, to include the page cache
dropped before the read-back)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aipcc_build import fsutil  # noqa: E402

CASES = (  # name, files, bytes each
    ("2000 x 2 KB in one directory", 2000, 2 << 10),
    ("20 x 100 KB", 20, 100 << 10),
    ("1 x 64 MB", 1, 64 << 20),
)


def bare(path: Path, data: bytes) -> None:
    """The writer before the read-back: a temporary beside PATH, written, synced, renamed."""
    tmp = path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(fd)
    os.replace(tmp, path)


def timed(write: Callable[[Path, bytes], None], where: Path, files: int, size: int,
          repeat: int) -> tuple[float, float]:
    """(CPU, wall) seconds of writing FILES files of SIZE bytes: the shortest of REPEAT
    runs each (CPU: this process's, whatever else the machine runs)."""
    data = os.urandom(size)
    cpu = wall = float("inf")
    for _ in range(repeat):
        target = Path(tempfile.mkdtemp(dir=where))
        start, clock = time.process_time(), time.perf_counter()
        for n in range(files):
            write(target / f"pkg{n}-1.0-py3-none-any.whl.metadata", data)
        cpu = min(cpu, time.process_time() - start)
        wall = min(wall, time.perf_counter() - clock)
        shutil.rmtree(target)
    return cpu, wall


def read_back_ratio(where: Path, size: int) -> float:
    read = 0
    real_pread = os.pread

    def counted(fd: int, length: int, offset: int) -> bytes:
        nonlocal read
        block = real_pread(fd, length, offset)
        read += len(block)
        return block

    os.pread = counted  # type: ignore[assignment]
    try:
        fsutil.write_atomic(where / "counted", os.urandom(size))
    finally:
        os.pread = real_pread
    return read / size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    where = Path(tempfile.mkdtemp(prefix="aipcc-bench-output-", dir=args.dir))
    try:
        for name, files, size in CASES:
            before, before_wall = timed(bare, where, files, size, args.repeat)
            now, now_wall = timed(fsutil.write_atomic, where, files, size, args.repeat)
            print(f"{name}: CPU {now:.3f} s / {before:.3f} s bare = {now / before:.2f}; "
                  f"wall {now_wall:.3f} s / {before_wall:.3f} s = {now_wall / before_wall:.2f}")
        print(f"bytes read back per byte written: {read_back_ratio(where, 8 << 20):.2f}")
    finally:
        shutil.rmtree(where)


if __name__ == "__main__":
    main()
