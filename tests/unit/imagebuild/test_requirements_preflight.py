"""The optional `requirements` field of an image kind: what its template installs, judged
before any build against each image's toolkit (as `validate --requirements` judges it)."""

from __future__ import annotations

import json

import pytest

from aipcc_build.errors import CheckFailed
from aipcc_build.imagebuild import preflight
from aipcc_build.matrix import expand, load
from tests.support.project import Project

# What pip resolves for a framework built for CUDA 12.9 (its report, as `pip install
# --dry-run --report` writes it).
REPORT = {"version": "1", "install": [
    {"requested": True, "metadata": {"name": "fw", "version": "1.0",
                                     "requires_dist": ["nvidia-cuda-runtime-cu12==12.9.79"]}},
    {"requested": False, "metadata": {"name": "nvidia-cuda-runtime-cu12",
                                      "version": "12.9.79"}}]}


def test_an_image_whose_requirements_bring_another_release_is_refused(
        project: Project) -> None:
    (project.root / "report.json").write_text(json.dumps(REPORT))
    project.edit("    os: [ubi9]\n", "    os: [ubi9]\n    requirements: ../report.json\n")
    images = {image.key: image for image in expand(load(project.matrix))}
    preflight.check_requirements([images["builder/cuda-12.9-ubi9"]])  # its own release
    with pytest.raises(CheckFailed) as caught:
        preflight.check_requirements(list(images.values()))
    message = str(caught.value)
    assert "builder/cuda-12.8-ubi9: its requirements" in message
    assert "nvidia-cuda-runtime-cu12 12.9.79: cuda 12.9 in a cuda 12.8 image; brought by fw" \
        in message
    assert caught.value.field == "images.builder.requirements"


def test_a_missing_requirements_file_is_refused_at_load(project: Project, cli) -> None:
    project.edit("    os: [ubi9]\n", "    os: [ubi9]\n    requirements: ../nothere.txt\n")
    result = cli("--matrix", str(project.matrix), "render")
    assert result.code == 2
    assert "images.builder.requirements: requirements file" in result.err
    assert "nothere.txt' not found" in result.err
