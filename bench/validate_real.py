"""Issue 11 target: the validator on a real image of the demo's shape (Debian 12 base, a
venv with NVIDIA's cudart, nvtx and cupti wheels installed by pip): cold and warm time per
image, and warm over `aipcc-build --version` (target <= 1.5).

Run: python bench/validate_real.py   (builds the image once from scripts/base-os and the
wheelhouse of scripts/fetch-wheels; removes it afterwards)
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from common import as_installed, script

IMAGE = "localhost/aipcc-bench/validate-real:cuda-12.8"
CONTAINERFILE = """\
FROM {base}
ENV PIP_PYTHON=/opt/venv/bin/python PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv --without-pip /opt/venv
RUN --mount=type=bind,source=.,target=/wheels pip install --no-index --no-deps \\
    --find-links /wheels nvidia-cuda-runtime-cu12==12.8.90 nvidia-nvtx-cu12==12.8.90 \\
    nvidia-cuda-cupti-cu12==12.8.90
LABEL ai.aipcc.accelerator=cuda ai.aipcc.accelerator.version=12.8.1 \\
      ai.aipcc.variant=cuda-deb12
ENV FROMAGER_VARIANT=cuda-deb12 CUDA_VERSION=12.8.1
"""


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env, timeout=600)
    return time.perf_counter() - start


def main() -> int:
    env = as_installed()
    env.setdefault("BUILDAH_ISOLATION", "chroot")
    base, wheelhouse = script("base-os"), script("fetch-wheels")
    subprocess.run(["buildah", "build", "-q", "-t", IMAGE, "-f", "-", wheelhouse],
                   input=CONTAINERFILE.format(base=base), text=True, check=True,
                   capture_output=True, env=env, timeout=900)
    program = shutil.which("aipcc-build", path=os.path.dirname(sys.executable)) or "aipcc-build"
    validate = [program, "validate", f"containers-storage:{IMAGE}", "--cache-dir"]
    try:
        colds, warms = [], []
        for _ in range(3):
            with tempfile.TemporaryDirectory() as cache:
                colds.append(timed([*validate, cache], env))
                warms += [timed([*validate, cache], env) for _ in range(5)]
        version = statistics.median(timed([program, "--version"], env) for _ in range(11))
    finally:
        subprocess.run(["buildah", "rmi", "-f", IMAGE], capture_output=True, timeout=120)
    cold, warm = statistics.median(colds), statistics.median(warms)
    print(f"validate one real image: cold {cold * 1000:.0f} ms, warm {warm * 1000:.0f} ms; "
          f"aipcc-build --version {version * 1000:.0f} ms")
    print(f"warm / --version: {warm / version:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
