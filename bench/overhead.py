"""Overhead of `aipcc-build matrix` over plain buildah.

16 small images (FROM scratch, one COPY each) built with --jobs 4, against `xargs -P4`
running `buildah build` over the same rendered Containerfiles. Target: ratio <= 1.15.

    python bench/overhead.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from common import aipcc_build, remove_images, write_matrix

IMAGES = 16
JOBS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    prefix = f"localhost/aipcc-bench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="aipcc-bench-") as tmp:
        root = Path(tmp)
        (root / "context").mkdir()
        (root / "context" / "payload").write_bytes(b"x" * 4096)
        versions = "\n".join(f"      - {{version: 1.{n}.0}}" for n in range(IMAGES))
        write_matrix(root, (
            "schema: 1\nproduct: {name: bench, version: '1'}\nregistry: localhost/unused\n"
            "os:\n  scratch: {from: scratch}\n"
            f"accelerators:\n  acc:\n    versions:\n{versions}\n"
            "images:\n  img: {template: img.j2, os: [scratch], context: ../context}\n"
        ), {"img.j2": "FROM {{ os_from }}\nCOPY payload /payload-{{ name }}\n"})
        containerfiles = sorted(str(p) for p in (root / "containerfiles").rglob("Containerfile"))
        assert len(containerfiles) == IMAGES

        ours, plain = [], []
        try:
            for round_ in range(args.rounds):
                ours.append(aipcc_build(
                    root, "--matrix", "matrix/bench.yaml", "matrix", "--jobs", str(JOBS),
                    "--registry", f"{prefix}/ours{round_}", "--log-dir", "logs",
                    "--report", "report.json"))
                script = (f'buildah build -q --build-arg AIPCC_BUILD_ID=dev -f "$1" '
                          f'-t {prefix}/plain{round_}/$(basename $(dirname "$1")):1 '
                          f'{root / "context"} >/dev/null')
                start = time.monotonic()
                subprocess.run(["xargs", f"-P{JOBS}", "-n1", "sh", "-c", script, "sh"],
                               input="\n".join(containerfiles), text=True, check=True)
                plain.append(time.monotonic() - start)
        finally:
            remove_images(prefix)
    ratio = statistics.median(ours) / statistics.median(plain)
    print(f"{IMAGES} images, --jobs {JOBS}, {args.rounds} rounds (median)")
    print(f"aipcc-build matrix: {statistics.median(ours):.2f} s  {[round(t, 2) for t in ours]}")
    print(f"xargs -P{JOBS} buildah: {statistics.median(plain):.2f} s  "
          f"{[round(t, 2) for t in plain]}")
    print(f"ratio: {ratio:.3f} (target <= 1.15)")


if __name__ == "__main__":
    main()
