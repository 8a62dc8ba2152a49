"""Issue 21 target: validating the largest image of the validator's corpus (every wheel of
tests/data/validator-corpus.yaml installed with pip into a venv of the real Debian 12
image, plus NVIDIA's CUDA 12.8 runtime wheels) read in place from containers-storage:
cold and warm time with this checkout, and cold and warm with BASE (default: the commit
this branch forked from `main`), and this checkout's cold time over BASE's (target <= 1.2).

Run: python bench/validate_corpus.py [--base REV]   (fetches the corpus wheels once, builds
the image, removes it afterwards)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from common import REPO, as_installed, script

IMAGE = "localhost/aipcc-bench/validate-corpus:cuda-12.8"
CONTAINERFILE = """\
FROM {base}
ENV PIP_PYTHON=/opt/venv/bin/python PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv --without-pip /opt/venv
RUN pip install --quiet --no-deps --no-index --no-compile {wheels}
RUN pip install --quiet --no-deps --no-index --no-compile \\
    /runtime/nvidia_cuda_runtime_cu12-12.8.90-*.whl /runtime/nvidia_nvtx_cu12-12.8.90-*.whl
LABEL ai.aipcc.accelerator=cuda ai.aipcc.accelerator.version=12.8.1
ENV CUDA_VERSION=12.8.1
"""

def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, env=env, timeout=600)
    if done.returncode not in (0, 1):  # 1: the image fails, which is a verdict
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}")
    return time.perf_counter() - start


def measure(env: dict[str, str]) -> tuple[float, float]:
    """Median cold (empty cache) and warm (cached) times of one validation."""
    validate = [sys.executable, "-m", "aipcc_build", "validate", f"containers-storage:{IMAGE}",
                "--cache-dir"]
    colds, warms = [], []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as cache:
            colds.append(timed([*validate, cache], env))
            warms += [timed([*validate, cache], env) for _ in range(5)]
    return statistics.median(colds), statistics.median(warms)


def newest(corpus: Path) -> list[str]:
    """The corpus wheels to install side by side: the newest version of each project."""
    by_project: dict[str, Path] = {}
    for path in sorted(corpus.glob("*.whl")):
        by_project[path.name.split("-")[0]] = path
    return [f"/wheels/{path.name}" for path in by_project.values()]


def checkout(revision: str, into: Path) -> Path:
    """The aipcc_build package of REVISION, unpacked under INTO, compiled as installed."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "aipcc_build"],
                             check=True, capture_output=True, timeout=120).stdout
    tar = into / "base.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as unpacked:
        unpacked.extractall(into, filter="data")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "aipcc_build")],
                   check=True)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the revision to compare with (default: the merge "
                                       "base of HEAD and main)")
    args = parser.parse_args()
    base_rev = args.base or subprocess.run(
        ["git", "-C", str(REPO), "merge-base", "HEAD", "main"], check=True,
        capture_output=True, text=True).stdout.strip()
    env = as_installed()
    env.setdefault("BUILDAH_ISOLATION", "chroot")
    base, runtime = script("base-os"), script("fetch-wheels")
    corpus = script("fetch-corpus-wheels")
    with tempfile.TemporaryDirectory() as work:
        built = subprocess.run(
            ["buildah", "build", "-q", "-t", IMAGE, f"--volume={corpus}:/wheels:ro",
             f"--volume={runtime}:/runtime:ro", "-f", "-", work],
            input=CONTAINERFILE.format(base=base, wheels=" ".join(newest(Path(corpus)))),
            text=True, capture_output=True, env=env,
            timeout=1800)
        if built.returncode != 0:
            raise SystemExit(f"buildah build failed: {built.stderr[-2000:]}")
        try:
            size = subprocess.run(["buildah", "images", "--noheading", "--format",
                                   "{{.Size}}", IMAGE], capture_output=True,
                                  text=True).stdout.strip()
            cold, warm = measure(env)
            old_env = dict(env, PYTHONPATH=str(checkout(base_rev, Path(work))))
            old_cold, old_warm = measure(old_env)
        finally:
            subprocess.run(["buildah", "rmi", "-f", IMAGE], capture_output=True, timeout=300)
    print(f"largest corpus image ({size or '?'}): this checkout cold {cold * 1000:.0f} ms, "
          f"warm {warm * 1000:.0f} ms; base {base_rev[:12]} cold {old_cold * 1000:.0f} ms, "
          f"warm {old_warm * 1000:.0f} ms")
    print(f"cold / base cold: {cold / old_cold:.2f} (target <= 1.2); "
          f"warm / base warm: {warm / old_warm:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
