"""The plan command's core: the images a plan selects, in dependency order, and what it
gives a CI engine: the plan itself (json), one document (github, gitlab, tekton), or the
tree of Konflux files, written or checked under the project."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from ..errors import InputError
from ..matrix import EVERYTHING, Filters, check_build_id
from .changes import select
from .dag import BuildPlan, make_plan, project_path, project_root

if TYPE_CHECKING:
    from ..matrix import Matrix
    from ..render import RenderResult
    from ..tools.git import Git
    from ..tools.runner import Runner

# The formats a build cluster runs: a registry, base image or index on this machine is no
# use to it.
CLUSTER_FORMATS = frozenset({"tekton", "konflux"})


@dataclass(frozen=True)
class PlanRequest:
    """One plan: its format, the images it selects, and what each job is told to do."""

    output_format: str  # json, github, gitlab, tekton or konflux
    build_id: str
    filters: Filters = EVERYTHING
    changed_since: Optional[str] = None  # a git revision
    registry: Optional[str] = None
    tls_verify: bool = True
    parent_build_id: Optional[str] = None
    jobs: Optional[int] = None
    capacity: str = ""
    push: bool = True
    output_dir: Optional[str] = None  # konflux: where its files go (the project root)
    check: bool = False  # konflux: compare with the files on disk, write nothing
    allow_loopback: bool = False  # a cluster format for a cluster on this machine
    allow_uncommitted: bool = False  # tekton: pin HEAD though the work tree differs

    def __post_init__(self) -> None:
        check_build_id(self.build_id)
        if self.parent_build_id is not None:  # it goes into every job
            check_build_id(self.parent_build_id, "parent_build_id")


@dataclass(frozen=True)
class PlanResult:
    plan: BuildPlan
    document: Optional[str] = None  # github, gitlab, tekton: the CI document
    konflux_files: Optional[RenderResult] = None  # konflux: what was written or checked


def refuse_uncommitted(git: Git, allowed: bool) -> None:
    """A PipelineRun clones the commit it pins: a plan made from a work tree that differs
    from it would list images, Containerfiles or contexts the clone does not have."""
    changed = [] if allowed else git.uncommitted()
    if changed:
        shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more"
                                           if len(changed) > 10 else "")
        raise InputError(f"the work tree has uncommitted changes ({shown}) but the "
                         f"PipelineRun builds commit {git.head_commit()[:12]}: commit them "
                         "first, or allow it", field="allow_uncommitted")


def plan_ci(matrix: Matrix, request: PlanRequest, runner: Runner) -> PlanResult:
    """The plan REQUEST asks of MATRIX; RUNNER runs git (changes, the commit, the origin)."""
    from ..tools.git import Git
    from . import emit

    # One job per image: it builds all the image's platforms (and joins them).
    build_plan = make_plan(select(matrix, build_id=request.build_id, registry=request.registry,
                                  filters=request.filters, changed_since=request.changed_since,
                                  runner=runner), per_platform=False)
    if request.output_format in CLUSTER_FORMATS and not request.allow_loopback:
        from .emit.cluster import refuse_loopback

        refuse_loopback(matrix, [b.image for b in build_plan.builds], request.registry)
    if request.output_format == "json":
        return PlanResult(build_plan)
    git = Git(runner, os.path.dirname(os.path.abspath(matrix.path)))
    if request.output_format == "konflux":
        # Not one document: a tree of files under the project, written or checked.
        from .emit import konflux

        url = matrix.ci.source_url or git.remote_url()
        konflux.refuse_unclonable(url)
        files = konflux.konflux(matrix, build_plan, konflux.KonfluxSource(url=url),
                                request.registry)
        written = konflux.write(
            request.output_dir or str(project_root(matrix)), files, check=request.check,
            remove_stale=request.filters == EVERYTHING and not request.changed_since)
        return PlanResult(build_plan, konflux_files=written)
    command = emit.JobCommand(
        matrix_path=project_path(matrix, matrix.path), build_id=request.build_id,
        registry=request.registry, tls_verify=request.tls_verify,
        parent_build_id=request.parent_build_id, jobs=request.jobs, capacity=request.capacity,
        fetch=matrix.ci.fetch, platforms=request.filters.platforms, push=request.push)
    source = None
    if request.output_format in emit.PINS_COMMIT:
        source = emit.GitSource(url=matrix.ci.source_url or git.remote_url(),
                                revision=git.head_commit())
    document = emit.ci_document(request.output_format, matrix, build_plan, command, source)
    if source is not None:
        refuse_uncommitted(git, request.allow_uncommitted)
    return PlanResult(build_plan, document=document)
