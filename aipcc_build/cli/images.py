"""Commands on the matrix itself: list, render, plan."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

import click

from .options import (
    Context,
    cli,
    matrix_filters,
    pass_context,
    reference_options,
    resolved_build_id,
)

if TYPE_CHECKING:
    from ..matrix import Filters


@cli.command()
@click.option("--check", is_flag=True,
              help="Write nothing; list drifted, missing and stale files; exit 1 if any.")
@matrix_filters
@pass_context
def render(context: Context, filters: Filters, check: bool) -> int:
    """Render the Containerfiles of the matrix from its templates."""
    from ..matrix import EVERYTHING
    from ..render import apply, render_all
    from ..report import matrix_output

    matrix = context.load()
    rendered = render_all(matrix, filters)
    # Stale files can only be told apart when the whole matrix was rendered.
    result = apply(matrix, rendered, check=check, remove_stale=filters == EVERYTHING)
    matrix_output.render_result(result)
    return 1 if check and result.changes else 0


@cli.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema 1).")
@reference_options
@matrix_filters
@pass_context
def list_images(context: Context, filters: Filters, as_json: bool, build_id: Optional[str],
                registry: Optional[str]) -> int:
    """One row per image: name, kind, accelerator, version, OS, variant, reference."""
    from ..matrix import expand
    from ..report import matrix_output

    images = expand(context.load(), build_id=resolved_build_id(build_id), registry=registry,
                    filters=filters)
    matrix_output.image_list(images, as_json)
    return 0


PLAN_FORMATS = ("json", "github", "gitlab", "tekton", "konflux")


@cli.command()
@click.option("--format", "output_format", type=click.Choice(PLAN_FORMATS), default="json",
              show_default=True, help="json: every image with all fields; github, gitlab, "
                                      "tekton, konflux (Pipelines-as-Code, .tekton/): a CI "
                                      "document fanning builds out (docs/ci).")
@click.option("--changed-since", metavar="GIT_REV",
              help="Only images whose inputs changed since GIT_REV, and their dependents.")
@reference_options
@click.option("--tls-verify", type=click.BOOL, default=True, show_default=True,
              metavar="true|false", help="Jobs verify the registry's TLS certificate.")
@click.option("--parent-build-id", metavar="ID",
              help="Jobs build from_image parents the plan leaves out FROM this build.")
@click.option("-j", "--jobs", type=click.IntRange(min=1),
              help="Passed to each job's aipcc-build matrix.")
@click.option("--capacity", metavar="SLOT=N,...", default="",
              help="Passed to each job's aipcc-build matrix: its runner's slots.")
@click.option("--push/--no-push", default=True, show_default=True,
              help="Jobs push what they build; --no-push: they build and validate only.")
@click.option("--output-dir", metavar="DIR", type=click.Path(file_okay=False),
              help="konflux: where .tekton/ and konflux/ go [default: the project root].")
@click.option("--check", is_flag=True,
              help="konflux: write nothing; list drifted, missing and stale files; exit 1 if "
                   "any.")
@click.option("--allow-loopback", is_flag=True,
              help="tekton, konflux: allow a registry, base image or index on this machine "
                   "(a cluster running here).")
@matrix_filters
@pass_context
def plan(context: Context, filters: Filters, output_format: str, changed_since: Optional[str],
         build_id: Optional[str], registry: Optional[str], tls_verify: bool,
         parent_build_id: Optional[str], jobs: Optional[int], capacity: str, push: bool,
         output_dir: Optional[str], check: bool, allow_loopback: bool) -> int:
    """The build plan as data for people or CI engines."""
    from ..imagebuild.preflight import parse_capacity
    from ..matrix import check_build_id
    from ..plan import emit, make_plan, project_path
    from ..plan.changes import select
    from ..report import matrix_output
    from ..tools.runner import ProcessRunner

    if (output_dir is not None or check) and output_format != "konflux":
        raise click.UsageError("--output-dir and --check go with --format konflux")
    matrix = context.load()
    build = resolved_build_id(build_id)
    if parent_build_id is not None:
        check_build_id(parent_build_id, "parent_build_id")  # it goes into every job
    parse_capacity(capacity)  # a bad slot is an input error now, not in every job
    processes = ProcessRunner()
    # One job per image: it builds all the image's platforms (and joins them).
    build_plan = make_plan(select(matrix, build_id=build, registry=registry, filters=filters,
                                  changed_since=changed_since, runner=processes),
                           per_platform=False)
    command = emit.JobCommand(
        matrix_path=project_path(matrix, matrix.path), build_id=build, registry=registry,
        tls_verify=tls_verify, parent_build_id=parent_build_id, jobs=jobs, capacity=capacity,
        fetch=matrix.ci.fetch, platforms=filters.platforms, push=push)
    if output_format in ("tekton", "konflux") and not allow_loopback:
        from ..plan.emit.cluster import refuse_loopback

        refuse_loopback(matrix, [b.image for b in build_plan.builds], registry)
    if output_format == "json":
        matrix_output.plan_json(matrix, build_plan, changed_since)
        return 0
    if output_format == "konflux":
        # Not one document: a tree of files under the project, written or checked.
        from ..matrix import EVERYTHING
        from ..plan.dag import project_root
        from ..plan.emit import konflux
        from ..tools.git import Git

        url = matrix.ci.source_url or Git(
            processes, os.path.dirname(os.path.abspath(matrix.path))).remote_url()
        konflux.refuse_unclonable(url)
        files = konflux.konflux(matrix, build_plan, konflux.KonfluxSource(url=url), registry)
        result = konflux.write(output_dir or str(project_root(matrix)), files, check=check,
                               remove_stale=filters == EVERYTHING and not changed_since)
        matrix_output.render_result(result, "Konflux file(s)",
                                    "aipcc-build plan --format konflux")
        return 1 if check and result.changes else 0
    source = None
    if output_format in emit.PINS_COMMIT:
        from ..tools.git import Git

        git = Git(processes, os.path.dirname(os.path.abspath(matrix.path)))
        source = emit.GitSource(url=matrix.ci.source_url or git.remote_url(),
                                revision=git.head_commit())
    matrix_output.ci_document(
        emit.ci_document(output_format, matrix, build_plan, command, source), build_plan)
    return 0
