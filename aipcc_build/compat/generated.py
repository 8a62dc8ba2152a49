"""The files generated from a matrix that the project commits and CI checks for drift,
besides its Containerfiles (which `render` owns): the Konflux files (`.tekton/`,
`konflux/`, from `plan --format konflux`) and the compatibility page (from `compat --format
markdown --stable`). A matrix edit (add-version, retire) regenerates them here, so that its
commit passes the same checks (tox.ini) as a hand-made one run through each generator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..fsutil import same_content, write_atomic
from ..matrix import EVERYTHING, Matrix, expand
from ..plan.ci_plan import PlanRequest, plan_ci
from ..plan.dag import project_path, project_root
from ..plan.emit.konflux import generated_from
from ..render import FileChange, RenderResult
from ..toolkit.facts import ToolkitFacts
from ..tools.runner import Runner
from .table import CompatTable, build_compat_table

# The committed compatibility page and the matrix it is generated from (project paths).
COMPAT_PAGE = "docs/compatibility.md"
COMPAT_PAGE_MATRIX = "matrix/aipcc.yaml"


@dataclass(frozen=True)
class Regenerated:
    konflux: Optional[RenderResult]  # None: the project commits no Konflux files of it
    compat_page: Optional[RenderResult]  # None: the page is not generated from this matrix


def regenerate(matrix: Matrix, facts: ToolkitFacts, *, build_id: str, runner: Runner,
               page: Callable[[CompatTable], str]) -> Regenerated:
    """Rewrite the generated files of MATRIX the project commits; PAGE renders the
    compatibility page's text from its table (the report stage owns its look)."""
    root = project_root(matrix)
    source = project_path(matrix, matrix.path)
    konflux = None
    if generated_from(str(root), source):
        konflux = plan_ci(matrix, PlanRequest(output_format="konflux", build_id=build_id,
                                              filters=EVERYTHING), runner).konflux_files
    compat_page = None
    target = root / COMPAT_PAGE
    if source == COMPAT_PAGE_MATRIX and target.is_file():
        import datetime as dt

        # The stable page leaves out what depends on the date: any day renders the same.
        table = build_compat_table(expand(matrix, build_id=build_id), facts,
                                   today=dt.date.today())
        compat_page = _write(target, page(table))
    return Regenerated(konflux=konflux, compat_page=compat_page)


def _write(path: Path, text: str) -> RenderResult:
    if same_content(path, text):
        return RenderResult(checked=False, changes=(), unchanged=1)
    write_atomic(path, text)
    return RenderResult(checked=False, changes=(FileChange(str(path), "changed"),),
                        unchanged=0)
