"""Scheduling quality of `aipcc-build matrix`: makespan / lower bound on a DAG matrix.

Five cells, each a chain base -> mid -> top (from_image), whose builds `RUN sleep` known,
different times; one cell's chain is much longer than the rest. Lower bound: the larger of
the critical path and total work / jobs, from the build durations measured in the report
(so buildah's own per-build cost is counted as work, not held against the scheduler); the
bound from the nominal sleeps alone is printed too. Target: makespan / bound <= 1.10.

    python bench/makespan.py [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import uuid
from pathlib import Path

from common import aipcc_build, lower_bound, makespan, remove_images, write_matrix

KINDS = ("base", "mid", "top")
# cell version -> sleep seconds of base, mid, top
SLEEPS = {
    "1.0.0": (6, 5, 6),
    "1.1.0": (1, 2, 1),
    "1.2.0": (2, 1, 2),
    "1.3.0": (1, 1, 3),
    "1.4.0": (3, 1, 1),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    prefix = f"localhost/aipcc-bench-{uuid.uuid4().hex[:8]}"
    versions = "\n".join(
        f"      - {{version: {v}, vars: {{{', '.join(f'{k}: {s}' for k, s in zip(KINDS, t))}}}}}"
        for v, t in SLEEPS.items())
    templates = {"base.j2": "FROM {{ os_from }}\nRUN sleep {{ vars.base }}\n",
                 "mid.j2": "FROM {{ from_ref }}\nRUN sleep {{ vars.mid }}\n",
                 "top.j2": "FROM {{ from_ref }}\nRUN sleep {{ vars.top }}\n"}
    with tempfile.TemporaryDirectory(prefix="aipcc-bench-") as tmp:
        root = Path(tmp)
        write_matrix(root, (
            "schema: 1\nproduct: {name: bench, version: '1'}\nregistry: localhost/unused\n"
            "os:\n  bb: {from: localhost/aipcc-demo/busybox:latest}\n"
            f"accelerators:\n  acc:\n    versions:\n{versions}\n"
            "images:\n  base: {template: base.j2, os: [bb]}\n"
            "  mid: {template: mid.j2, os: [bb], from_image: base}\n"
            "  top: {template: top.j2, os: [bb], from_image: mid}\n"
        ), templates)
        try:
            aipcc_build(root, "--matrix", "matrix/bench.yaml", "matrix",
                        "--jobs", str(args.jobs), "--registry", prefix, "--report",
                        "report.json")
            report = json.loads((root / "report.json").read_text())
        finally:
            remove_images(prefix)

    images = {image["key"]: image for image in report["images"]}
    span = makespan(list(images.values()))
    measured = {key: image["build_duration"] for key, image in images.items()}

    def cell(version: str) -> str:
        return "acc-" + ".".join(version.split(".")[:2]) + "-bb"

    chains = [[f"{kind}/{cell(v)}" for kind in KINDS] for v in SLEEPS]
    nominal = {f"{kind}/{cell(v)}": s for v, t in SLEEPS.items() for kind, s in zip(KINDS, t)}
    critical, work = lower_bound(measured, chains, args.jobs)
    lower = max(critical, work)
    print(f"{len(images)} builds in {len(SLEEPS)} chains, --jobs {args.jobs}")
    print(f"makespan: {span:.2f} s")
    print(f"lower bound (measured build times): {lower:.2f} s "
          f"(critical path {critical:.2f} s, work/jobs {work:.2f} s)")
    print(f"lower bound (nominal sleeps): {max(lower_bound(nominal, chains, args.jobs)):.2f} s")
    print(f"ratio: {span / lower:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
