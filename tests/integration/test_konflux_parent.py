"""A dependent image builds FROM its parent as each engine passes it, with real buildah
and a registry on 127.0.0.1: by default the parent's tag of the same build (aipcc-build
matrix, GitLab, GitHub, plain Tekton), on Konflux the pin of its build-args file after
the parent's build nudged it (by digest: the tag there need not exist), and an unpinned
args file (no nudge yet) fails the build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.konflux import renovate_nudge
from tests.support.layers import run
from tests.support.project import REPO, git_repository, shipped_project
from tests.support.registry import Registry

pytestmark = pytest.mark.integration

CHILD = "aipcc-3-0-devel-cpu-el9-6"


def aipcc(project: Path, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "aipcc_build", "--matrix",
                           str(project / "matrix/aipcc.yaml"), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def build_args(path: Path) -> list[str]:
    """The file as buildah's --build-arg-file reads it: KEY=VALUE lines, # comments."""
    return [f"--build-arg={line}" for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def test_a_dependent_builds_from_its_parent_by_tag_or_by_the_nudged_digest(
        base_image: str, registry: Registry, tmp_path: Path) -> None:
    project = git_repository(shipped_project(tmp_path / "project"))
    matrix = project / "matrix/aipcc.yaml"
    parent = f"{registry.host}/aipcc/base-images/cpu-el9.6"
    matrix.write_text(matrix.read_text().replace("registry: quay.io/aipcc",
                                                 f"registry: {registry.host}/aipcc", 1))
    aipcc(project, "render")
    aipcc(project, "plan", "--format", "konflux", "--allow-loopback")
    # The rendered preamble of the dependent, then nothing that needs the network.
    rendered = (project / "containerfiles/devel/cpu-el9.6/Containerfile").read_text()
    preamble = rendered.splitlines()[:4]
    assert preamble[2:] == [f"ARG AIPCC_PARENT={parent}:3.0-${{AIPCC_BUILD_ID}}",
                            "FROM ${AIPCC_PARENT}"]
    context = tmp_path / "context"
    context.mkdir()
    (context / "Containerfile").write_text("\n".join([*preamble, "LABEL child=1", ""]))
    digest_file = tmp_path / "digest"
    run("buildah", "push", "--quiet", "--tls-verify=false", "--digestfile", str(digest_file),
        base_image, f"docker://{parent}:3.0-abc")
    digest = digest_file.read_text().strip()

    def build(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["buildah", "build", "--quiet", "--tls-verify=false",
                               "--pull=always", *args, "-t", "localhost/aipcc-nudge/child:1",
                               str(context)], capture_output=True, text=True, timeout=600)

    try:
        # GitLab, GitHub, plain Tekton: the build id names the parent's tag.
        by_tag = build("--build-arg", "AIPCC_BUILD_ID=abc")
        assert by_tag.returncode == 0, by_tag.stderr
        # Konflux before the parent's first nudge: the unpinned file pulls nothing.
        args_file = project / f"konflux/build-args/{CHILD}.conf"
        unpinned = build("--build-arg", "AIPCC_BUILD_ID=def", *build_args(args_file))
        assert unpinned.returncode != 0 and "sha256:0000" in unpinned.stderr
        # The nudge: by digest, though no build of commit `def` tagged the parent.
        push = (project / ".tekton/aipcc-3-0-base-cpu-el9-6-push.yaml").read_text()
        nudge_files = next(line.split(": ", 1)[1] for line in push.splitlines()
                           if "build-nudge-files" in line)
        assert renovate_nudge(project, nudge_files, parent, digest) == [
            f"konflux/build-args/{CHILD}.conf"]
        by_digest = build("--build-arg", "AIPCC_BUILD_ID=def", *build_args(args_file))
        assert by_digest.returncode == 0, by_digest.stderr
        aipcc(project, "render", "--check")
        aipcc(project, "plan", "--format", "konflux", "--allow-loopback", "--check")
    finally:
        for image in ("localhost/aipcc-nudge/child:1", f"{parent}:3.0-abc",
                      f"{parent}@{digest}"):
            subprocess.run(["buildah", "rmi", image], capture_output=True, timeout=120)
