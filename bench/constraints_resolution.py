"""Issue 33 target: resolving with an image's constraints costs at most 1.1x the same
`pip install --dry-run` without them.

The set is torch 2.8.0's as pip resolves it on Linux (a framework pinning NVIDIA's CUDA
12.8 components; bench/requirements_speed.py lists it), offered by a local find-links
directory that also holds each component's CUDA 12.9 version, as PyPI does: small wheels
with the real names, versions and dependencies, so the benchmark measures resolution and
needs no network. The constraints are a CUDA 12.8 image's (toolkit/constraints.py). pip
and, where installed, uv are timed each way; neither reads any config file.

Run: python bench/constraints_resolution.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from common import REPO, as_installed, shortest
from requirements_speed import TORCH_28

sys.path.insert(0, str(REPO))
from aipcc_build.toolkit.constraints import constraints_text, target_of  # noqa: E402
from tests.support.wheels import make_wheel  # noqa: E402

# CUDA 12.9.1's versions of the components torch 2.8.0 pins (the component table's).
NEWER = {"nvidia-cuda-nvrtc-cu12": "12.9.86", "nvidia-cuda-runtime-cu12": "12.9.79",
         "nvidia-cuda-cupti-cu12": "12.9.79", "nvidia-cublas-cu12": "12.9.1.4",
         "nvidia-cufft-cu12": "11.4.1.4", "nvidia-curand-cu12": "10.3.10.19",
         "nvidia-cusolver-cu12": "11.7.5.82", "nvidia-cusparse-cu12": "12.5.10.65",
         "nvidia-nvtx-cu12": "12.9.79", "nvidia-nvjitlink-cu12": "12.9.86",
         "nvidia-cufile-cu12": "1.14.1.1"}


def main() -> int:
    env = as_installed()
    for key in [k for k in env if k.startswith(("PIP_", "UV_"))]:
        del env[key]
    env["PIP_CONFIG_FILE"] = os.devnull
    env["UV_NO_CONFIG"] = "1"
    with tempfile.TemporaryDirectory() as work:
        links = Path(work) / "links"
        make_wheel(links, "torch", "2.8.0",
                   requires=[f"{name}=={version}" for name, version in TORCH_28.items()])
        for name, version in {**TORCH_28}.items():
            make_wheel(links, name, version)
        for name, version in NEWER.items():
            make_wheel(links, name, version)
        constraints = Path(work) / "constraints.txt"
        constraints.write_text(constraints_text(target_of("cuda", "12.8.1")))
        pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
               "--ignore-installed", "--no-index", "--find-links", str(links), "torch==2.8.0"]
        shortest(pip, env, repeat=2)  # warm the page cache
        bare_wall, bare_cpu = shortest(pip, env, repeat=9)
        with_wall, with_cpu = shortest(pip + ["--constraint", str(constraints)], env, repeat=9)
        ratio = with_wall / bare_wall
        print(f"pip install --dry-run (torch 2.8.0's set, {len(TORCH_28) + 1} "
              f"distributions): {bare_wall * 1000:.0f} ms ({bare_cpu * 1000:.0f} ms CPU); "
              f"with the CUDA 12.8 constraints: {with_wall * 1000:.0f} ms "
              f"({with_cpu * 1000:.0f} ms CPU)")
        print(f"ratio: {ratio:.2f} (target <= 1.1); in CPU time: {with_cpu / bare_cpu:.2f}")
        uv = shutil.which("uv", path=os.path.dirname(sys.executable)) or shutil.which("uv")
        if uv:
            command = [uv, "pip", "install", "--dry-run", "--quiet", "--python",
                       sys.executable, "--no-index", "--find-links", str(links),
                       "--no-cache", "torch==2.8.0"]
            uv_bare, _ = shortest(command, env, repeat=9)
            uv_with, _ = shortest(command + ["--constraint", str(constraints)], env, repeat=9)
            print(f"uv pip install --dry-run: {uv_bare * 1000:.0f} ms; with the constraints: "
                  f"{uv_with * 1000:.0f} ms; ratio {uv_with / uv_bare:.2f}")
    return 0 if ratio <= 1.1 else 1


if __name__ == "__main__":
    sys.exit(main())
