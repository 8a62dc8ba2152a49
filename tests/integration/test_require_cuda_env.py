"""NVIDIA_REQUIRE_CUDA is rendered over continuation lines (no Containerfile line is long);
real buildah must join them back into the one value NVIDIA's runtime reads."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from aipcc_build.toolkit.driver_branches import load_driver_branches

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_buildah_reads_the_continued_driver_branch_clauses_as_one_value(tmp_path: Path) -> None:
    text = (REPO / "containerfiles" / "builder" / "cuda-12.9-ubi9" / "Containerfile"
            ).read_text()
    start = text.index("ENV CUDA_VERSION=")
    end = text.index("\n", text.index("LD_LIBRARY_PATH=", start))
    (tmp_path / "Containerfile").write_text("FROM scratch\n" + text[start:end] + "\n")
    name = f"localhost/aipcc-test/require-cuda:{uuid.uuid4().hex[:8]}"
    subprocess.run(["buildah", "build", "-q", "-t", name, "-f", str(tmp_path / "Containerfile"),
                    str(tmp_path)], check=True, capture_output=True, timeout=120)
    try:
        inspected = subprocess.run(["buildah", "inspect", name], check=True,
                                   capture_output=True, text=True, timeout=60).stdout
    finally:
        subprocess.run(["buildah", "rmi", name], capture_output=True, timeout=60)
    env = dict(item.split("=", 1) for item in json.loads(inspected)["OCIv1"]["config"]["Env"])
    assert env["NVIDIA_REQUIRE_CUDA"] == load_driver_branches().require_cuda("12.9")
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
