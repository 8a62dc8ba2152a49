"""`validate --requirements` on real requirement sets resolved by real pip from PyPI's
metadata (issue 33): a framework pinned for the image's release passes, the same framework
for another release fails naming it, an unpinned set that floats to a newer release fails.
The reports are resolved once (a dry run: PEP 658 metadata, no wheel is installed) and
cached like the wheelhouse."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aipcc_build.toolkit.constraints import constraints_text, target_of

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# Resolved once per cache, which AIPCC_CACHE names (an empty one shows the resolution works).
CACHE = Path(os.environ.get("AIPCC_CACHE") or Path.home() / ".cache" / "aipcc-build") / \
    "requirements"


def pip_report(requirements: str) -> Path:
    """pip's --dry-run --report of REQUIREMENTS, resolved once and cached."""
    key = hashlib.sha256(requirements.encode()).hexdigest()[:16]
    path = CACHE / f"report-{key}.json"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        listing = CACHE / f"requirements-{key}.txt"
        listing.write_text(requirements)
        partial = path.with_suffix(".partial")
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run",
                        "--ignore-installed", "--quiet", "--report", str(partial),
                        "--requirement", str(listing)], check=True, capture_output=True,
                       timeout=900, env={**os.environ, "PIP_CONSTRAINT": ""})
        partial.rename(path)
    return path


def validate(*args: str, constraints: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aipcc_build", "validate", *args],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO),
                               "PIP_CONSTRAINT": constraints,
                               "PIP_BUILD_CONSTRAINT": constraints})


def test_a_framework_for_the_images_release_passes_and_for_another_fails() -> None:
    torch28 = pip_report("torch==2.8.0\n")  # pins CUDA 12.8's components
    ok = validate("--requirements", str(torch28), "--expect", "cuda=12.8", "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    verdict = json.loads(ok.stdout)
    judged = {f["component"]: f for f in verdict["findings"]}
    assert judged["nvidia-cuda-runtime-cu12"]["component_version"] == "12.8.90"
    assert judged["nvidia-cudnn-cu12"]["status"] == "ok"  # own numbering, CUDA 12
    # The same set in a CUDA 12.9 image: every release-numbered component fails, by torch.
    other = validate("--requirements", str(torch28), "--expect", "cuda=12.9")
    assert other.returncode == 1
    assert "violation: nvidia-cublas-cu12 12.8.4.1: cuda 12.8 in a cuda 12.9 image; " \
           "brought by torch" in other.stdout
    # The same framework built for another release (torch 2.7.1 pins CUDA 12.6's).
    torch27 = pip_report("torch==2.7.1\n")
    older = validate("--requirements", str(torch27), "--expect", "cuda=12.8")
    assert older.returncode == 1
    assert "violation: nvidia-cuda-runtime-cu12 12.6.77: cuda 12.6 in a cuda 12.8 image; " \
           "brought by torch" in older.stdout


def test_an_unpinned_set_floats_to_a_newer_release(tmp_path: Path) -> None:
    # Resolved here by `validate` itself, with this Python's pip (a dry run), run where the
    # caller's pip keeps to a CPU image's constraints (our CI image's): they refuse every
    # NVIDIA wheel, yet the set is judged as pip alone resolves it.
    cpu = tmp_path / "cpu-constraints.txt"
    cpu.write_text(constraints_text(target_of("cpu", None)))
    listing = tmp_path / "requirements.txt"
    listing.write_text("nvidia-cuda-runtime-cu12\n")
    floated = validate("--requirements", str(listing), "--expect", "cuda=12.8",
                       constraints=str(cpu))
    assert floated.returncode == 1, floated.stdout + floated.stderr
    assert "violation: nvidia-cuda-runtime-cu12 12.9." in floated.stdout
    pinned = tmp_path / "pinned.txt"
    pinned.write_text("nvidia-cuda-runtime-cu12==12.8.90\n")
    clean = validate("--requirements", str(pinned), "--expect", "cuda=12.8",
                     constraints=str(cpu))
    assert clean.returncode == 0, clean.stdout + clean.stderr
