"""Issue 23 figures: a 2,000-image matrix through the commands that read all of it: `list`,
`matrix --dry-run`, `plan --format gitlab` and `plan --format konflux`, each one process,
its wall time and peak memory (RSS).

2,000 images: 200 toolkit versions x 5 OSes x 2 kinds (a builder and a from_image child),
rendered once into a temporary project.

Run: python bench/matrix_scale.py [--versions N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, as_installed

OSES = ["os0", "os1", "os2", "os3", "os4"]
TEMPLATE = "FROM {{ os_from }}\nRUN echo {{ accelerator }} {{ major }}.{{ minor }}\n"
COMMANDS = (
    ("list", ["list"]),
    ("matrix --dry-run", ["matrix", "--dry-run"]),
    ("plan --format gitlab", ["plan", "--format", "gitlab"]),
    ("plan --format konflux", ["plan", "--format", "konflux"]),
)


def write_project(root: Path, versions: int) -> Path:
    lines = ["schema: 1", 'product: {name: bench, version: "1.0"}', "registry: example.com/b",
             "os:"]
    lines += [f"  {o}: {{from: example.com/base/{o}:1}}" for o in OSES]
    lines += ["accelerators:", "  cuda:", "    versions:"]
    lines += [f"      - {{version: {1 + v // 100}.{v % 100}.0, native_driver: 500.1, "
              f"eol: 2030-01-01}}" for v in range(versions)]
    lines += ["images:",
              "  builder: {template: t.j2, os: [os0, os1, os2, os3, os4]}",
              "  devel: {template: t.j2, from_image: builder, os: [os0, os1, os2, os3, os4],"
              " resources: {cpu: 1, memory: 1Gi}}"]
    (root / "templates").mkdir(parents=True)
    (root / "templates" / "t.j2").write_text(TEMPLATE)
    (root / "matrix").mkdir()
    path = root / "matrix" / "m.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS bytes of one run (which must succeed)."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        assert proc.stderr is not None
        sys.exit(f"{' '.join(command)} failed:\n{proc.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=200, help="10 images per version")
    args = parser.parse_args()
    env = {**as_installed(), "CI": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        matrix = write_project(root, args.versions)
        base = [sys.executable, "-m", "aipcc_build", "--matrix", str(matrix)]
        subprocess.run([*base, "render"], cwd=root, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Plans name the project's repository; Konflux's PipelineRuns clone it from origin.
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        subprocess.run(["git", "remote", "add", "origin", "https://git.example.com/bench.git"],
                       cwd=root, check=True)
        print(f"{10 * args.versions} images ({REPO.name} checkout)")
        for label, command in COMMANDS:
            runs = [timed([*base, *command], root, env) for _ in range(3)]
            seconds = min(r[0] for r in runs)
            peak = max(r[1] for r in runs)
            print(f"{label}: {seconds:.2f} s, peak RSS {peak / 2**20:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
