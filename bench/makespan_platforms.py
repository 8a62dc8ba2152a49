"""Scheduling quality of a 2-platform `aipcc-build matrix` (issue 13): makespan / lower
bound, and the emulation slowdown measured on the way.

Three cells, each a chain base -> top (from_image), for linux/amd64 (native) and
linux/arm64 (qemu emulation) on the real Debian bases (scripts/base-os). Each build runs a
CPU-bound Python loop of known length, so the emulated builds cost what emulation really
costs. Lower bound: the larger of the critical path (base then top, per cell and platform)
and total work / jobs, from the build durations in the report, emulated ones counted as
the work they were. The manifest lists are made but not pushed. Target: ratio <= 1.10.

The emulation slot is set to --jobs (`--capacity emulation=N`): the bound assumes any job
may run any build. The default slot (half the CPUs) keeps emulated builds from swamping
the host, at a cost this bench would count against the scheduler.

    python bench/makespan_platforms.py [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import uuid
from pathlib import Path

from common import REPO, aipcc_build, lower_bound, makespan, remove_images, write_matrix

KINDS = ("base", "top")
# cell version -> millions of loop iterations of base, top (about a second each natively)
LOOPS = {"1.0.0": (8, 6), "1.1.0": (3, 5), "1.2.0": (4, 2)}
PLATFORMS = ("linux/amd64", "linux/arm64")
RUN = 'RUN python3 -c "sum(i * i for i in range({{ vars.%s }} * 1000000))"\n'


def base_image(*arch: str) -> str:
    done = subprocess.run([str(REPO / "scripts" / "base-os"), *arch], check=True,
                          capture_output=True, text=True, timeout=3600)
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    subprocess.run([str(REPO / "scripts" / "setup-emulation")], check=True,
                   capture_output=True, timeout=120)
    amd64, arm64 = base_image(), base_image("--arch", "arm64")
    prefix = f"localhost/aipcc-bench-{uuid.uuid4().hex[:8]}"
    versions = "\n".join(
        f"      - {{version: {v}, vars: {{{', '.join(f'{k}: {n}' for k, n in zip(KINDS, t))}}}}}"
        for v, t in LOOPS.items())
    templates = {"base.j2": "FROM {{ os_from }}\n" + RUN % "base",
                 "top.j2": "FROM {{ from_ref }}\n" + RUN % "top"}
    with tempfile.TemporaryDirectory(prefix="aipcc-bench-") as tmp:
        root = Path(tmp)
        write_matrix(root, (
            "schema: 1\nproduct: {name: bench, version: '1'}\nregistry: localhost/unused\n"
            f"platforms: [{', '.join(PLATFORMS)}]\n"
            f"os:\n  deb:\n    from: {{linux/amd64: {amd64}, linux/arm64: {arm64}}}\n"
            f"accelerators:\n  acc:\n    versions:\n{versions}\n"
            "images:\n  base: {template: base.j2, os: [deb]}\n"
            "  top: {template: top.j2, os: [deb], from_image: base}\n"
        ), templates)
        try:
            aipcc_build(root, "--matrix", "matrix/bench.yaml", "matrix", "--jobs",
                        str(args.jobs), "--capacity", f"emulation={args.jobs}", "--registry",
                        prefix, "--report", "report.json")
            report = json.loads((root / "report.json").read_text())
        finally:
            remove_images(prefix)

    images = report["images"]
    durations = {f"{i['key']}@{i['platform']}": i["build_duration"] for i in images}

    def cell(version: str) -> str:
        return "acc-" + ".".join(version.split(".")[:2]) + "-deb"

    chains = [[f"{kind}/{cell(v)}@{p}" for kind in KINDS] for v in LOOPS for p in PLATFORMS]
    critical, work = lower_bound(durations, chains, args.jobs)
    lower = max(critical, work)
    span = makespan(images)
    slowdowns = [durations[f"{kind}/{cell(v)}@linux/arm64"]
                 / durations[f"{kind}/{cell(v)}@linux/amd64"] for v in LOOPS for kind in KINDS]
    native = sum(d for k, d in durations.items() if k.endswith("amd64"))
    emulated = sum(d for k, d in durations.items() if k.endswith("arm64"))
    print(f"{len(images)} builds ({len(LOOPS)} cells x {len(KINDS)} kinds x "
          f"{len(PLATFORMS)} platforms), --jobs {args.jobs}")
    print(f"work: native {native:.1f} s, emulated {emulated:.1f} s")
    print(f"emulation slowdown (arm64 / amd64 build time, same image): "
          f"mean {sum(slowdowns) / len(slowdowns):.1f}x, range {min(slowdowns):.1f}x-"
          f"{max(slowdowns):.1f}x")
    print(f"makespan: {span:.2f} s")
    print(f"lower bound: {lower:.2f} s (critical path {critical:.2f} s, "
          f"work/jobs {work:.2f} s)")
    print(f"ratio: {span / lower:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
