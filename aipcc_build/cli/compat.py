"""Commands on compatibility: compat (the table), select (what runs on a node)."""

from __future__ import annotations

import datetime as dt
import sys
from typing import TYPE_CHECKING, Optional

import click

from .options import (
    DATE,
    Context,
    cli,
    matrix_filters,
    pass_context,
    reference_options,
    resolved_build_id,
)

if TYPE_CHECKING:
    from ..matrix import Filters


def _today(value: Optional[dt.datetime]) -> dt.date:
    return value.date() if value is not None else dt.date.today()


@cli.command()
@click.option("--format", "output_format", type=click.Choice(["table", "markdown", "json", "html"]),
              default="table", show_default=True, help="Output format.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Build report JSON: show the digest each image was built with.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write to FILE (atomically) instead of stdout.")
@click.option("--warn-days", type=click.IntRange(min=0), default=90, show_default=True,
              help="EOL within this many days counts as eol-soon.")
@click.option("--today", type=DATE, metavar="YYYY-MM-DD", help="Date to judge EOL against.")
@click.option("--check", is_flag=True,
              help="Only list images past EOL or within --warn-days of it; exit 1 if any.")
@click.option("--stable", is_flag=True,
              help="Leave out what changes with the date or build id (EOL status, tags): "
                   "for committed docs.")
@click.option("--check-drift", is_flag=True,
              help="Write nothing; exit 1 if -o FILE differs from what would be written.")
@click.option("--wide", is_flag=True,
              help="Table: every column, however wide the terminal (default: columns are "
                   "left out to fit; never the image or its reference).")
@reference_options
@matrix_filters
@pass_context
def compat(context: Context, filters: Filters, output_format: str, report_path: Optional[str],
           output: Optional[str], warn_days: int, today: Optional[dt.datetime], check: bool,
           stable: bool, check_drift: bool, wide: bool, build_id: Optional[str],
           registry: Optional[str]) -> int:
    """The compatibility matrix: per image the driver it needs, the GPU architectures it
    supports, its EOL date and status, and its digest from a build report."""
    from .. import report
    from ..compat.table import build_compat_table, eol_findings
    from ..imagebuild import build_report
    from ..matrix import expand
    from ..report import compat_formats
    from ..toolkit.facts import load_facts

    if check_drift and not output:
        raise click.UsageError("--check-drift compares against -o FILE")
    if stable and output_format != "markdown":
        raise click.UsageError("--stable applies to --format markdown")
    facts = load_facts()
    images = expand(context.load(), build_id=resolved_build_id(build_id), registry=registry,
                    filters=filters)
    digests = build_report.digests(build_report.read(report_path)) if report_path else None
    table = build_compat_table(images, facts, today=_today(today), warn_days=warn_days,
                               digests=digests)
    if check:
        findings = eol_findings(table)
        sys.stdout.write(compat_formats.render_eol_findings(findings))
        sys.stderr.write(f"{len(table.rows)} image(s) checked against EOL on "
                         f"{table.today.isoformat()}: {len(findings)} past EOL or within "
                         f"{warn_days} days\n")
        return 1 if findings else 0
    if output_format == "table" and not output:
        report.table(*compat_formats.table_columns(table), keep=compat_formats.COMPAT_KEEP,
                     drop=compat_formats.COMPAT_DROP, wide=wide)
        for warning in table.warnings:
            report.warning(warning)
        return 0
    text = compat_formats.document(table, output_format, facts.sources(), stable=stable)
    return 0 if report.deliver(text, output, check_drift=check_drift) else 1


@cli.command()
@click.option("--gpu", metavar="NAME", help="GPU product name: H100, A100, MI300X, ...")
@click.option("--compute-capability", metavar="X.Y", help="Instead of --gpu: e.g. 9.0.")
@click.option("--driver", metavar="VERSION", help="NVIDIA driver version, e.g. 550.54.15.")
@click.option("--node", "node_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="A node object (kubectl get node NAME -o json): read its GPU labels.")
@click.option("--emit", type=click.Choice(["k8s"]),
              help="Print a nodeSelector/affinity fragment for the best image instead.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema 1).")
@click.option("--warn-days", type=click.IntRange(min=0), default=90, show_default=True,
              help="EOL within this many days is flagged eol-soon.")
@click.option("--today", type=DATE, metavar="YYYY-MM-DD", help="Date to judge EOL against.")
@reference_options
@matrix_filters
@pass_context
def select(context: Context, filters: Filters, gpu: Optional[str],
           compute_capability: Optional[str], driver: Optional[str], node_file: Optional[str],
           emit: Optional[str], as_json: bool, warn_days: int, today: Optional[dt.datetime],
           build_id: Optional[str], registry: Optional[str]) -> int:
    """The images that run on a node, best first, and why every other image does not.
    Exits 1 when none runs."""
    from ..compat.select import (
        node_from_flags,
        node_from_k8s,
        scheduling_constraints,
        select_images,
    )
    from ..matrix import expand
    from ..report import compat_formats
    from ..toolkit.facts import load_facts

    if node_file and (gpu or compute_capability or driver):
        raise click.UsageError("--node replaces --gpu, --compute-capability and --driver")
    if emit and as_json:
        raise click.UsageError("--emit and --json are alternatives")
    facts = load_facts()
    node = node_from_k8s(facts, node_file) if node_file else node_from_flags(
        facts, gpu=gpu, compute_capability=compute_capability, driver=driver)
    images = expand(context.load(), build_id=resolved_build_id(build_id), registry=registry,
                    filters=filters)
    selection = select_images(images, facts, node, today=_today(today), warn_days=warn_days)
    if emit == "k8s":
        if selection.runnable:
            best = selection.runnable[0].image
            sys.stdout.write(compat_formats.render_k8s(best, scheduling_constraints(best, facts)))
    elif as_json:
        sys.stdout.write(compat_formats.render_selection_json(selection))
    else:
        sys.stdout.write(compat_formats.render_selection_text(selection))
    if not selection.runnable:
        from .. import report

        report.error(f"no image of the matrix runs on {node.describe()}")
        return 1
    return 0
