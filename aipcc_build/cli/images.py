"""Commands on the matrix itself: list, render, plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import click

from .options import (
    Context,
    cli,
    matrix_filters,
    pass_context,
    reference_options,
    resolved_build_id,
    tls_verify_option,
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
@click.option("--wide", is_flag=True,
              help="Every column, however wide the terminal (default: columns are left out "
                   "to fit; never the name or the reference).")
@reference_options
@matrix_filters
@pass_context
def list_images(context: Context, filters: Filters, as_json: bool, wide: bool,
                build_id: Optional[str], registry: Optional[str]) -> int:
    """One row per image: name, kind, accelerator, version, OS, variant, reference."""
    from ..matrix import expand
    from ..report import matrix_output

    images = expand(context.load(), build_id=resolved_build_id(build_id), registry=registry,
                    filters=filters)
    matrix_output.image_list(images, as_json, wide)
    return 0


PLAN_FORMATS = ("json", "github", "gitlab", "tekton", "konflux")
# The formats whose jobs tag what they build with the plan's build id (Konflux tags by
# revision).
JOB_FORMATS = ("github", "gitlab", "tekton")


@cli.command()
@click.option("--format", "output_format", type=click.Choice(PLAN_FORMATS), default="json",
              show_default=True, help="json: every image with all fields; github, gitlab, "
                                      "tekton, konflux (Pipelines-as-Code, .tekton/): a CI "
                                      "document fanning builds out (docs/ci).")
@click.option("--changed-since", metavar="GIT_REV",
              help="Only images whose inputs changed since GIT_REV, and their dependents.")
@reference_options
@tls_verify_option("Jobs verify the registry's TLS certificate (and require HTTPS).")
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
@click.option("--allow-uncommitted", is_flag=True,
              help="tekton: plan from a work tree with uncommitted changes (the PipelineRun "
                   "still builds the HEAD commit).")
@click.option("--allow-loopback", is_flag=True,
              help="tekton, konflux: allow a registry, base image or index on this machine "
                   "(a cluster running here).")
@matrix_filters
@pass_context
def plan(context: Context, filters: Filters, output_format: str, changed_since: Optional[str],
         build_id: Optional[str], registry: Optional[str], tls_verify: bool,
         parent_build_id: Optional[str], jobs: Optional[int], capacity: str, push: bool,
         output_dir: Optional[str], check: bool, allow_uncommitted: bool,
         allow_loopback: bool) -> int:
    """The build plan as data for people or CI engines."""
    from ..imagebuild.preflight import parse_capacity
    from ..plan.ci_plan import PlanRequest, plan_ci
    from ..report import matrix_output
    from ..tools.runner import ProcessRunner

    if (output_dir is not None or check) and output_format != "konflux":
        raise click.UsageError("--output-dir and --check go with --format konflux")
    parse_capacity(capacity)  # a bad slot is an input error now, not in every job
    matrix = context.load()
    result = plan_ci(matrix, PlanRequest(
        output_format=output_format,
        build_id=resolved_build_id(build_id, required_in_ci=output_format in JOB_FORMATS),
        filters=filters,
        changed_since=changed_since, registry=registry, tls_verify=tls_verify,
        parent_build_id=parent_build_id, jobs=jobs, capacity=capacity, push=push,
        output_dir=output_dir, check=check, allow_loopback=allow_loopback,
        allow_uncommitted=allow_uncommitted), ProcessRunner())
    if result.konflux_files is not None:
        matrix_output.render_result(result.konflux_files, "Konflux file(s)",
                                    "aipcc-build plan --format konflux")
        return 1 if check and result.konflux_files.changes else 0
    if result.document is None:
        matrix_output.plan_json(matrix, result.plan, changed_since)
        return 0
    matrix_output.ci_document(result.document, result.plan)
    return 0


@cli.command()
@click.option("--check", is_flag=True,
              help="Write nothing; list drifted, missing and stale files; exit 1 if any.")
@pass_context
def regenerate(context: Context, check: bool) -> int:
    """Regenerate every file derived from the matrices after a hand edit.

    Every matrix in the matrix file's directory: its Containerfiles, the Konflux files and
    the compatibility page of the matrix they come from; and the command reference
    (docs/reference/). What `render --check`, `plan --format konflux --check`, `compat
    --check` and `reference --check` compare, in one command.
    """
    from pathlib import Path

    from ..compat.generated import DerivedFiles, regenerate_project
    from ..report import compat_formats, matrix_output
    from ..toolkit.facts import load_facts
    from ..tools.runner import ProcessRunner
    from .reference import REFERENCE_DIR
    from .reference import write as write_reference

    directory = Path(context.matrix_path).parent
    paths = sorted(str(path) for path in directory.glob("*.yaml"))
    facts = load_facts()
    derived = regenerate_project(
        paths, facts, build_id=resolved_build_id(None), runner=ProcessRunner(),
        page=lambda table: compat_formats.document(table, "markdown", facts.sources(),
                                                   stable=True), check=check)
    reference_dir = directory.resolve().parent / REFERENCE_DIR
    derived.append(DerivedFiles("reference page(s)",
                                write_reference(str(reference_dir), check=check)))
    matrix_output.regenerated(derived)
    return 1 if check and any(item.result.changes for item in derived) else 0
