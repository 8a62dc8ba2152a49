"""Issue 12 target: publishing a wheel index of 2,000 wheels, and republishing it after one
wheel is added, which must cost at most 0.2x the full publish (only what changed is read and
written; unchanged wheels' metadata is reused from the manifest, unchanged pages linked).

Run: python bench/index_publish.py [--wheels N] [--runs R]
The wheels are small (8 KiB of payload each), the worst case for the ratio: hashing and
copying real wheels of megabytes makes the full publish slower and the republish no slower.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aipcc_build.matrix import load  # noqa: E402
from aipcc_build.wheel_indexes.static_tree import TreeRequest, publish  # noqa: E402

DEMO = Path(__file__).resolve().parent.parent / "matrix" / "demo.yaml"


def make_wheel(directory: Path, name: str, version: str) -> None:
    stem = f"{name}-{version}"
    with zipfile.ZipFile(directory / f"{stem}-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{name}/__init__.py", os.urandom(8192).hex()[:8192])
        archive.writestr(f"{stem}.dist-info/METADATA",
                         f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                         "Requires-Python: >=3.9\nRequires-Dist: packaging\n")
        archive.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        archive.writestr(f"{stem}.dist-info/RECORD", "")


def timed(matrix: object, request: TreeRequest) -> float:
    start = time.perf_counter()
    result = publish(matrix, request)  # type: ignore[arg-type]
    assert not result.refusals and result.variants[0].changed
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    matrix = load(DEMO)
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        wheels = Path(tmp) / "wheels"
        wheels.mkdir()
        for number in range(args.wheels):  # two versions of each project
            make_wheel(wheels, f"project_{number // 2}", f"1.{number % 2}")
        full, again = [], []
        for run in range(args.runs):
            request = TreeRequest(root=str(Path(tmp) / f"root{run}"),
                                   wheels={"cuda12.8-debian": (str(wheels),)})
            full.append(timed(matrix, request))
            make_wheel(wheels, f"added_{run}", "1.0")
            again.append(timed(matrix, request))
        full_s, again_s = statistics.median(full), statistics.median(again)
    print(f"full publish of {args.wheels} wheels: {full_s:.2f} s (median of {args.runs}: "
          f"{', '.join(f'{t:.2f}' for t in full)})")
    print(f"republish after adding one wheel: {again_s:.3f} s (median of {args.runs}: "
          f"{', '.join(f'{t:.3f}' for t in again)})")
    ratio = again_s / full_s
    print(f"ratio {ratio:.3f} (target <= 0.2): {'ok' if ratio <= 0.2 else 'MISSED'}")
    return 0 if ratio <= 0.2 else 1


if __name__ == "__main__":
    sys.exit(main())
