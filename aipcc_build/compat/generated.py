"""The files generated from a matrix that the project commits and CI checks for drift,
besides its Containerfiles (which `render` owns): the Konflux files (`.tekton/`,
`konflux/`, from `plan --format konflux`) and the compatibility page (from `compat --format
markdown --stable`). A matrix edit (add-version, retire) regenerates them here, so that its
commit passes the same checks (tox.ini) as a hand-made one run through each generator;
`regenerate_project` rewrites (or checks) every file derived from every matrix of the
project after a hand edit: `aipcc-build regenerate`, the one command each drift check
names."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..fsutil import same_content, write_atomic
from ..matrix import EVERYTHING, Matrix, expand, load
from ..plan.ci_plan import PlanRequest, plan_ci
from ..plan.dag import project_path, project_root
from ..plan.emit.konflux import generated_from, orphans
from ..render import FileChange, RenderResult, apply, render_all
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


@dataclass(frozen=True)
class DerivedFiles:
    """What `regenerate_project` did to (or, checking, found in) one kind of file of one
    matrix: WHAT says which ("Containerfile(s) of matrix/demo.yaml")."""

    what: str
    result: RenderResult


def regenerate_project(matrix_paths: Sequence[str], facts: ToolkitFacts, *, build_id: str,
                       runner: Runner, page: Callable[[CompatTable], str],
                       check: bool = False) -> list[DerivedFiles]:
    """Every file derived from the matrices at MATRIX_PATHS, written (atomically) or, with
    CHECK, compared and nothing written: each matrix's Containerfiles (stale ones removed),
    and the Konflux files and compatibility page of the matrix they come from."""
    derived: list[DerivedFiles] = []
    sources: list[str] = []
    root: Optional[Path] = None
    for path in matrix_paths:
        matrix = load(path)
        shown = project_path(matrix, matrix.path)
        sources.append(shown)
        root = project_root(matrix)
        derived.append(DerivedFiles(
            f"Containerfile(s) of {shown}",
            apply(matrix, render_all(matrix, EVERYTHING), check=check, remove_stale=True)))
        regenerated = regenerate(matrix, facts, build_id=build_id, runner=runner, page=page,
                                 check=check)
        if regenerated.konflux is not None:
            derived.append(DerivedFiles(f"Konflux file(s) of {shown}", regenerated.konflux))
        if regenerated.compat_page is not None:
            derived.append(DerivedFiles(f"compatibility page of {shown}",
                                        regenerated.compat_page))
    if root is not None and not any(item.what.startswith("Konflux") for item in derived):
        # No plan ran, so none found the Konflux files of a matrix that is gone (renamed,
        # removed): stale all the same.
        stale = orphans(str(root), sources)
        if stale:
            if not check:
                for orphan in stale:
                    orphan.unlink()
            derived.append(DerivedFiles("Konflux file(s) of no matrix", RenderResult(
                checked=check, changes=tuple(FileChange(str(p), "stale") for p in stale),
                unchanged=0)))
    return derived


def regenerate(matrix: Matrix, facts: ToolkitFacts, *, build_id: str, runner: Runner,
               page: Callable[[CompatTable], str], check: bool = False) -> Regenerated:
    """Rewrite the generated files of MATRIX the project commits (with CHECK: compare them,
    write nothing); PAGE renders the compatibility page's text from its table (the report
    stage owns its look)."""
    root = project_root(matrix)
    source = project_path(matrix, matrix.path)
    konflux = None
    # Declared (ci.committed) or found on the disk: a check that finds nothing to compare
    # because every file is gone has checked nothing.
    committed = matrix.ci.committed
    if "konflux" in committed or generated_from(str(root), source):
        konflux = plan_ci(matrix, PlanRequest(output_format="konflux", build_id=build_id,
                                              filters=EVERYTHING, check=check),
                          runner).konflux_files
    compat_page = None
    target = root / COMPAT_PAGE
    if "compatibility-page" in committed or (source == COMPAT_PAGE_MATRIX
                                             and target.is_file()):
        import datetime as dt

        # The stable page leaves out what depends on the date: any day renders the same.
        table = build_compat_table(expand(matrix, build_id=build_id), facts,
                                   today=dt.date.today())
        compat_page = _write(target, page(table), check=check)
    return Regenerated(konflux=konflux, compat_page=compat_page)


def _write(path: Path, text: str, *, check: bool) -> RenderResult:
    if same_content(path, text):
        return RenderResult(checked=check, changes=(), unchanged=1)
    state = "changed" if path.exists() else "missing"
    if not check:
        write_atomic(path, text)
    return RenderResult(checked=check, changes=(FileChange(str(path), state),), unchanged=0)
