"""Issue 33 target: `aipcc-build validate --requirements REPORT --expect cuda=12.8` on a
resolved set (pip's --dry-run --report JSON) takes at most 1.5x `aipcc-build --version`.

The report is torch 2.8.0's set as pip resolves it on Linux x86_64 (NVIDIA's CUDA 12.8
components with the versions torch pins, and torch's other dependencies), written here so
that the benchmark needs no network.

Run: python bench/requirements_speed.py   (uses the aipcc-build on PATH next to this python)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from common import as_installed, installed_script, shortest

# torch 2.8.0's Requires-Dist on Linux x86_64 (PyPI), and what they pull in.
TORCH_28 = {
    "nvidia-cuda-nvrtc-cu12": "12.8.93", "nvidia-cuda-runtime-cu12": "12.8.90",
    "nvidia-cuda-cupti-cu12": "12.8.90", "nvidia-cudnn-cu12": "9.10.2.21",
    "nvidia-cublas-cu12": "12.8.4.1", "nvidia-cufft-cu12": "11.3.3.83",
    "nvidia-curand-cu12": "10.3.9.90", "nvidia-cusolver-cu12": "11.7.3.90",
    "nvidia-cusparse-cu12": "12.5.8.93", "nvidia-cusparselt-cu12": "0.7.1",
    "nvidia-nccl-cu12": "2.27.3", "nvidia-nvtx-cu12": "12.8.90",
    "nvidia-nvjitlink-cu12": "12.8.93", "nvidia-cufile-cu12": "1.13.1.3",
    "triton": "3.4.0", "sympy": "1.14.0", "typing-extensions": "4.15.0",
    "filelock": "3.19.1", "fsspec": "2025.9.0", "jinja2": "3.1.6", "networkx": "3.5",
    "markupsafe": "3.0.2", "mpmath": "1.3.0", "setuptools": "80.9.0",
}


def report(path: Path) -> None:
    install = [{"requested": True, "metadata": {
        "name": "torch", "version": "2.8.0",
        "requires_dist": [f"{name}=={version}" for name, version in TORCH_28.items()]}}]
    install += [{"requested": False, "metadata": {"name": name, "version": version}}
                for name, version in TORCH_28.items()]
    path.write_text(json.dumps({"version": "1", "install": install}))


def main() -> int:
    script = installed_script()
    env = as_installed()
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "report.json"
        report(path)
        judge = [script, "validate", "--requirements", str(path), "--expect", "cuda=12.8"]
        shortest(judge, env, repeat=3)  # warm the page cache
        version_wall, version_cpu = shortest([script, "--version"], env)
        judge_wall, judge_cpu = shortest(judge, env)
    ratio = judge_wall / version_wall
    print(f"aipcc-build --version: {version_wall * 1000:.1f} ms ({version_cpu * 1000:.1f} ms "
          f"CPU); validate --requirements (torch 2.8.0's set, {len(TORCH_28) + 1} "
          f"distributions): {judge_wall * 1000:.1f} ms ({judge_cpu * 1000:.1f} ms CPU)")
    print(f"ratio: {ratio:.2f} (target <= 1.5); in CPU time: {judge_cpu / version_cpu:.2f}")
    return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
