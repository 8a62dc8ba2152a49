"""`plan_ci`, the plan command's core, called without click: one request in, the plan and
what the engine gets out."""

from __future__ import annotations

from pathlib import Path

import pytest

from aipcc_build.errors import InputError
from aipcc_build.matrix import load
from aipcc_build.plan.ci_plan import PlanRequest, plan_ci
from aipcc_build.tools.runner import ProcessRunner
from tests.support.project import git, with_origin


def test_a_document_format_returns_its_document_and_json_the_plan_only(repo: Path) -> None:
    matrix = load(str(repo / "matrix/aipcc.yaml"))
    gitlab = plan_ci(matrix, PlanRequest(output_format="gitlab", build_id="7"),
                     ProcessRunner())
    assert gitlab.document is not None and "--build-id 7" in gitlab.document
    assert gitlab.konflux_files is None
    as_json = plan_ci(matrix, PlanRequest(output_format="json", build_id="7"),
                      ProcessRunner())
    assert as_json.document is None and as_json.konflux_files is None
    assert [b.image.key for b in as_json.plan.builds] == [
        b.image.key for b in gitlab.plan.builds]


def test_a_parent_build_id_is_checked_like_a_build_id(repo: Path) -> None:
    matrix = load(str(repo / "matrix/aipcc.yaml"))
    with pytest.raises(InputError) as refused:
        plan_ci(matrix, PlanRequest(output_format="gitlab", build_id="7",
                                    parent_build_id="-x\n"), ProcessRunner())
    assert refused.value.field == "parent_build_id"


def test_tekton_refuses_a_work_tree_that_differs_from_the_commit_it_pins(repo, cli) -> None:
    """The PipelineRun clones HEAD: an image only the work tree has would be planned but
    never be in the clone. Exit 2 naming the files, unless --allow-uncommitted."""
    with_origin(repo, "https://git.example.com/aipcc/images.git")
    git(repo, "commit", "-qam", "no source_url", "--allow-empty")
    matrix = repo / "matrix/aipcc.yaml"
    assert cli("--matrix", str(matrix), "plan", "--format", "tekton").code == 0
    (repo / "templates" / "builder.Containerfile.j2").write_text("FROM scratch\n")
    (repo / "notes with space.txt").write_text("new\n")
    git(repo, "mv", "README.md", "READ-ME.md")
    refused = cli("--matrix", str(matrix), "plan", "--format", "tekton")
    assert refused.code == 2 and refused.out == ""
    assert refused.err.count("\n") == 1
    for name in ("templates/builder.Containerfile.j2", "notes with space.txt", "READ-ME.md",
                 "--allow-uncommitted"):
        assert name in refused.err, refused.err
    assert "README.md," not in refused.err  # a rename's former path is no change of its own
    allowed = cli("--matrix", str(matrix), "plan", "--format", "tekton", "--allow-uncommitted")
    assert allowed.code == 0, allowed.err
    # Formats that pin no commit do not care.
    assert cli("--matrix", str(matrix), "plan", "--format", "gitlab").code == 0
