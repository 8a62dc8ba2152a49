"""Issue 33 target: resolving with an image's constraints costs at most 1.1x the same
`pip install --dry-run` without them.

The set is torch 2.8.0's as pip resolves it on Linux (a framework pinning NVIDIA's CUDA
12.8 components; bench/requirements_speed.py lists it), beside each component's CUDA 12.9
version, as PyPI offers them: small wheels with the real names, versions and dependencies,
so the benchmark measures resolution and needs no network. The constraints are a CUDA
12.8 image's (toolkit/constraints.py). pip and, where installed, uv are timed each way;
neither reads any config file. Two ways of offering the set:

- a PEP 503 index with PEP 658 metadata served on loopback (scripts/serve-dir): how pip
  resolves in an image, which is configured for its variant's index. The target is
  judged here;
- a find-links directory, no HTTP at all: the least pip can spend on resolving, so the
  constraints' fixed cost (pip builds an option parser for each line of the file, about
  0.2 ms a line) shows the most. Printed beside, not judged.

Run: python bench/constraints_resolution.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, as_installed, shortest
from requirements_speed import TORCH_28

sys.path.insert(0, str(REPO))
from aipcc_build.toolkit.constraints import constraints_text, target_of  # noqa: E402
from tests.support.wheels import make_wheel, simple_index  # noqa: E402

# CUDA 12.9.1's versions of the components torch 2.8.0 pins (the component table's).
NEWER = {"nvidia-cuda-nvrtc-cu12": "12.9.86", "nvidia-cuda-runtime-cu12": "12.9.79",
         "nvidia-cuda-cupti-cu12": "12.9.79", "nvidia-cublas-cu12": "12.9.1.4",
         "nvidia-cufft-cu12": "11.4.1.4", "nvidia-curand-cu12": "10.3.10.19",
         "nvidia-cusolver-cu12": "11.7.5.82", "nvidia-cusparse-cu12": "12.5.10.65",
         "nvidia-nvtx-cu12": "12.9.79", "nvidia-nvjitlink-cu12": "12.9.86",
         "nvidia-cufile-cu12": "1.14.1.1"}


def interleaved(first: list[str], second: list[str], env: dict[str, str], repeat: int = 15
                ) -> tuple[tuple[float, float], tuple[float, float]]:
    """The shortest (wall, CPU) of FIRST and of SECOND, run by turns: a change in the
    machine's load during the run then weighs on both alike."""
    runs: tuple[list[tuple[float, float]], list[tuple[float, float]]] = ([], [])
    for _ in range(repeat):
        runs[0].append(shortest(first, env, repeat=1))
        runs[1].append(shortest(second, env, repeat=1))
    return min(runs[0]), min(runs[1])


def compare(label: str, source: list[str], constraints: Path, env: dict[str, str]) -> float:
    """Print pip's (and uv's) dry run of the set from SOURCE without and with CONSTRAINTS;
    return pip's wall-time ratio."""
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
           "--ignore-installed", *source, "torch==2.8.0"]
    shortest(pip, env, repeat=2)  # warm the page cache
    (bare_wall, bare_cpu), (with_wall, with_cpu) = interleaved(
        pip, pip + ["--constraint", str(constraints)], env)
    ratio = with_wall / bare_wall
    print(f"{label}: pip install --dry-run (torch 2.8.0's set, {len(TORCH_28) + 1} "
          f"distributions): {bare_wall * 1000:.0f} ms ({bare_cpu * 1000:.0f} ms CPU); "
          f"with the CUDA 12.8 constraints: {with_wall * 1000:.0f} ms "
          f"({with_cpu * 1000:.0f} ms CPU); ratio {ratio:.2f}, in CPU time "
          f"{with_cpu / bare_cpu:.2f}")
    uv = shutil.which("uv", path=os.path.dirname(sys.executable)) or shutil.which("uv")
    if uv:
        command = [uv, "pip", "install", "--dry-run", "--quiet", "--python",
                   sys.executable, *source, "--no-cache", "torch==2.8.0"]
        (uv_bare, _), (uv_with, _) = interleaved(
            command, command + ["--constraint", str(constraints)], env)
        print(f"{label}: uv pip install --dry-run: {uv_bare * 1000:.0f} ms; with the "
              f"constraints: {uv_with * 1000:.0f} ms; ratio {uv_with / uv_bare:.2f}")
    return ratio


def main() -> int:
    env = as_installed()
    for key in [k for k in env if k.startswith(("PIP_", "UV_"))]:
        del env[key]
    env["PIP_CONFIG_FILE"] = os.devnull
    env["UV_NO_CONFIG"] = "1"
    with tempfile.TemporaryDirectory() as work:
        links = Path(work) / "links"
        wheels = [make_wheel(links, "torch", "2.8.0",
                             requires=[f"{n}=={v}" for n, v in TORCH_28.items()])]
        wheels += [make_wheel(links, n, v) for pins in (TORCH_28, NEWER)
                   for n, v in pins.items()]
        constraints = Path(work) / "constraints.txt"
        constraints.write_text(constraints_text(target_of("cuda", "12.8.1")))
        simple_index(Path(work) / "index", wheels)
        serve = str(REPO / "scripts" / "serve-dir")
        pidfile = str(Path(work) / "server.pid")
        url = subprocess.run([serve, str(Path(work) / "index"), "--pidfile", pidfile],
                             capture_output=True, text=True, check=True, timeout=60
                             ).stdout.strip().splitlines()[-1]
        try:
            ratio = compare("index on loopback (as in an image)",
                            ["--index-url", f"{url}simple/"], constraints, env)
        finally:
            subprocess.run([serve, "--stop", "--pidfile", pidfile], capture_output=True,
                           timeout=60)
        compare("find-links directory (no HTTP; not judged)",
                ["--no-index", "--find-links", str(links)], constraints, env)
    print(f"ratio with an index: {ratio:.2f} (target <= 1.1)")
    return 0 if ratio <= 1.1 else 1


if __name__ == "__main__":
    sys.exit(main())
