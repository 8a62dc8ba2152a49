"""The optional `context` field of an image kind: the build-context directory."""

from __future__ import annotations

import os

from aipcc_build.matrix import expand, load
from aipcc_build.plan import build_context
from tests.support.project import Project


def test_context_is_relative_to_the_matrix_file(project: Project) -> None:
    project.edit("    os: [ubi9]\n", "    os: [ubi9]\n    context: ../wheels\n")
    images = {image.key: image for image in expand(load(project.matrix))}
    assert build_context(images["builder/cuda-12.8-ubi9"]) == str(project.root / "wheels")
    # Other kinds keep the directory of their rendered Containerfile.
    base = images["base/cuda-12.8-el9.6"]
    assert build_context(base) == os.path.dirname(base.containerfile)


def test_context_need_not_exist_at_load_time(project: Project) -> None:
    # Build inputs (the demo's wheels) are often fetched after `render --check` has run.
    project.edit("    os: [ubi9]\n", "    os: [ubi9]\n    context: ../not-yet\n")
    assert not (project.root / "not-yet").exists()
    load(project.matrix)


def test_context_must_be_a_single_value(project: Project, cli) -> None:
    project.edit("    os: [ubi9]\n", "    os: [ubi9]\n    context: [a, b]\n")
    result = cli("--matrix", str(project.matrix), "render")
    assert result.code == 2
    assert "images.builder.context: expected a single value" in result.err
