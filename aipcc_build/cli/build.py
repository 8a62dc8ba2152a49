"""`aipcc-build matrix`: options become one `MatrixBuild` request for `build_matrix`."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Optional

import click

from .. import defaults
from . import signals
from .options import (
    Context,
    authfile_for_tools,
    cli,
    matrix_filters,
    name_values,
    pass_context,
    reference_options,
    resolved_build_id,
    tls_verify_option,
)

if TYPE_CHECKING:
    from ..matrix import Filters


@cli.command()
@click.option("--dry-run", is_flag=True, help="Print the build plan; build nothing.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: print JSON (schema 1).")
@reference_options
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=defaults.jobs,
              show_default="CPUs, at most 4", help="Builds at most at once.")
@click.option("--capacity", metavar="SLOT=N,...", default="",
              help="Override or add resource slots: cpu=8,memory=32Gi,gpu=0 "
                   "(default: this host's CPUs and memory).")
@click.option("--history", metavar="REPORT",
              help="Order builds by the durations in an earlier run's build report.")
@click.option("--fail-fast", is_flag=True, help="Stop everything at the first failure.")
@click.option("--retries", type=click.IntRange(min=0), default=defaults.RETRIES,
              show_default=True,
              help="Retries of a pull/network failure or a push, with backoff.")
@click.option("--build-timeout", type=click.FloatRange(min=0, min_open=True),
              default=defaults.BUILD_TIMEOUT, show_default=True, metavar="SECONDS",
              help="Stop one image's buildah build after this long (it failed).")
@click.option("--push-timeout", type=click.FloatRange(min=0, min_open=True),
              default=defaults.PUSH_TIMEOUT,
              show_default=True, metavar="SECONDS",
              help="Stop one push attempt after this long (then retry, see --retries).")
@click.option("--push-stall", type=click.FloatRange(min=0, min_open=True),
              default=defaults.PUSH_STALL, show_default=True, metavar="SECONDS",
              help="Stop one push attempt that sends and receives nothing for this long "
                   "(then retry, see --retries).")
@click.option("--render", "rerender", is_flag=True,
              help="Render the Containerfiles first instead of refusing stale ones.")
@click.option("--allow-eol", is_flag=True, help="Build toolkit versions past their eol date.")
@click.option("--skip-index-check", "skip_wheel_index_check", is_flag=True,
              help="Do not ask each image's wheel index whether it answers before building "
                   "(to try a new version before its index exists); a warning says so.")
@click.option("--parent-build-id", metavar="ID",
              help="Build id of from_image parents this run does not build (a change-aware "
                   "plan left them out): children are built FROM them.")
@click.option("--push", is_flag=True, help="Push every image that built to its repository.")
@tls_verify_option("Verify the registry's TLS certificate (and require HTTPS).")
@authfile_for_tools
@click.option("--log-dir", default=defaults.LOG_DIR, show_default=True, metavar="DIR",
              help="One log file per image: DIR/<kind>/<name>.log.")
@click.option("--report", "report_path", default=defaults.REPORT_FILE, show_default=True,
              metavar="PATH", help="The JSON build report (schema 1).")
@click.option("--junit", "junit_path", metavar="PATH", help="Also write a JUnit XML report.")
@click.option("--pull", type=click.Choice(["always", "missing", "never"]),
              help="buildah's pull policy for base images (default: buildah's).")
@click.option("--layers/--no-layers", default=None,
              help="Cache intermediate layers (default: buildah's, BUILDAH_LAYERS).")
@click.option("--build-arg", "build_args", multiple=True, metavar="NAME=VALUE",
              callback=name_values, help="Passed to buildah build (repeatable).")
@matrix_filters
@pass_context
def matrix(context: Context, filters: Filters, dry_run: bool, as_json: bool,
           build_id: Optional[str], registry: Optional[str], jobs: int, capacity: str,
           history: Optional[str], fail_fast: bool, retries: int, rerender: bool,
           allow_eol: bool, skip_wheel_index_check: bool, push: bool, tls_verify: bool,
           log_dir: str, report_path: str,
           junit_path: Optional[str], pull: Optional[str], layers: Optional[bool],
           build_args: dict[str, str],
           parent_build_id: Optional[str], build_timeout: float,
           push_timeout: float, push_stall: float) -> int:
    """Build every image of the matrix, concurrently and in dependency order."""
    import threading

    from ..environment import provenance_labels
    from ..imagebuild import build_report, matrix_build
    from ..imagebuild.preflight import parse_capacity
    from ..imagebuild.schedule_options import ScheduleOptions
    from ..report import junit, matrix_output, progress

    resolved = resolved_build_id(build_id)
    request = matrix_build.MatrixBuild(
        matrix_path=context.matrix_path, filters=filters, build_id=resolved,
        registry=registry, parent_build_id=parent_build_id, rerender=rerender,
        allow_eol=allow_eol, report_path=report_path,
        skip_wheel_index_check=skip_wheel_index_check,
        schedule=ScheduleOptions(
            jobs=jobs, capacity=parse_capacity(capacity),
            history=build_report.durations(build_report.read(history, field="history"))
            if history else {},
            fail_fast=fail_fast, retries=retries, build_timeout=build_timeout,
            push_timeout=push_timeout, push_stall=push_stall, push=push,
            tls_verify=tls_verify, log_dir=log_dir,
            build_args=build_args, labels=provenance_labels(os.environ), layers=layers,
            pull=pull),
    )
    if dry_run:
        matrix_output.build_plan(matrix_build.plan_matrix(request), as_json)
        return 0
    # build_matrix checks the report's path too: here both fail before the live view opens
    build_report.check_writable(report_path, field="report_path")
    if junit_path:
        build_report.check_writable(junit_path, field="junit")

    # A signal stops the builds; the scheduler cleans up and returns what finished, and the
    # report is written.
    stop = threading.Event()
    with signals.stopping(lambda signum: stop.set()) as received, \
            progress.MatrixView() as view:
        result = matrix_build.build_matrix(request, view, stop)
    # The builds are done and pushed: whatever the disk says, the summary comes, the report
    # (build_matrix wrote it) goes to stderr when its file cannot be written, and the error
    # comes last.
    unwritten = [result.report_error] if result.report_error is not None else []
    try:
        if junit_path:
            junit.write_junit(result, junit_path)
    except OSError as exc:
        unwritten.append(exc)
    lost = result.report_error is not None
    progress.matrix_summary(result, None if lost else report_path)
    if lost:
        sys.stderr.write(build_report.text(result, resolved))
    if unwritten:
        raise unwritten[0]
    if received:
        return 128 + received[0]
    return 0 if result.ok else 1


@cli.command(reads_matrix=False)
def clean() -> int:
    """Remove the working containers that runs of `matrix` killed on this host left behind
    (a run that is still going is left alone)."""
    from ..imagebuild.matrix_build import clean as clean_runs
    from ..report import matrix_output

    matrix_output.cleaned(clean_runs())
    return 0
