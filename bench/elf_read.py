"""Issue 29.2 figures: the ELF reader is linear in its input.

Run: python bench/elf_read.py [PROVIDER.so]

- bombs: `runtime_release` on files of N dynamic symbol table headers over the whole file
  (a 77 kB one took 66 s before the reader took one table): refused, time flat.
- one table: a file whose single dynamic symbol table holds 10k to 1M symbols, none the
  one sought: time per MB stays flat (one pass).
- provider: `dynamic_entries` on a real shared object (default: ONNX Runtime's ROCm
  provider from the test cache, tests/support/partial_wheels.py), reading through or
  passing over what it does not hold: bytes read, seconds.
"""

from __future__ import annotations

import contextlib
import struct
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aipcc_build.validate.elf import ElfLimit, dynamic_entries, runtime_release  # noqa: E402
from tests.support.elf import EM_X86_64, dynsym_bomb, runtime_elf  # noqa: E402
from tests.support.partial_wheels import cache_dir  # noqa: E402


def seconds(call: Callable[..., object], *args: object) -> float:
    started = time.perf_counter()
    with contextlib.suppress(ElfLimit):
        call(*args)
    return time.perf_counter() - started


def one_table(symbols: int) -> bytes:
    base = bytearray(runtime_elf(EM_X86_64, 12080, via_call=False))
    at = len(base) + (-len(base) % 8)
    table = at + 24 * symbols
    data = base.ljust(at, b"\0") + bytes(24 * symbols) + bytes(64)
    data += struct.pack("<IIQQQQIIQQ", 0, 11, 0, 0, at, 24 * symbols, 0, 0, 8, 24)
    struct.pack_into("<Q", data, 40, table)
    struct.pack_into("<H", data, 60, 2)
    return bytes(data)


def main() -> None:
    for copies in (100, 1000, 10000):
        bomb = dynsym_bomb(copies)
        print(f"bomb {copies:>6} tables {len(bomb) / 1e3:8.0f} kB: "
              f"{seconds(runtime_release, bomb) * 1e3:8.2f} ms (refused)")
    for symbols in (10_000, 100_000, 1_000_000):
        data = one_table(symbols)
        took = seconds(runtime_release, data)
        print(f"one table {symbols:>8} symbols {len(data) / 1e6:6.1f} MB: {took:6.3f} s, "
              f"{took / (len(data) / 1e6):6.3f} s/MB")
    wheels = sorted((cache_dir() / "partial-wheels").glob("onnxruntime_rocm-*.whl"))
    member = "onnxruntime/capi/libonnxruntime_providers_rocm.so"
    if len(sys.argv) > 1:
        data = Path(sys.argv[1]).read_bytes()
    elif wheels:
        with zipfile.ZipFile(wheels[0]) as archive:
            data = archive.read(member)
    else:
        print("provider: none cached (run tests/integration/test_real_builds.py once)")
        return
    for how in ("read through", "passed over"):
        position = 0

        def read(size: int) -> bytes:
            nonlocal position
            piece = data[position:position + size]
            position += len(piece)
            return piece

        def skip(size: int) -> int:
            nonlocal position
            size = min(size, len(data) - position)
            position += size
            return size

        took = seconds(dynamic_entries, read, skip if how == "passed over" else None)
        print(f"provider {len(data) / 1e6:.0f} MB, {how}: {position / 1e6:.1f} MB consumed, "
              f"{took * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
