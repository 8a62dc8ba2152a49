"""`plan_ci`, the plan command's core, called without click: one request in, the plan and
what the engine gets out."""

from __future__ import annotations

from pathlib import Path

import pytest

from aipcc_build.errors import InputError
from aipcc_build.matrix import load
from aipcc_build.plan.ci_plan import PlanRequest, plan_ci
from aipcc_build.tools.runner import ProcessRunner


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
