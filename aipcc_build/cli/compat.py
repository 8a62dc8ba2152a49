"""Commands on compatibility: compat (the table), select (what runs on a node)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Optional

import click

from ..compat import DEFAULT_WARN_DAYS
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
@click.option("--report", "report_paths", multiple=True, type=click.Path(), metavar="PATH",
              help="Build report JSON, or a directory of them (repeatable: the reports of "
                   "one build's CI jobs are joined): show the digest each image was built "
                   "with.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write to FILE (atomically) instead of stdout.")
@click.option("--warn-days", type=click.IntRange(min=0), default=DEFAULT_WARN_DAYS,
              show_default=True,
              help="EOL within this many days counts as eol-soon.")
@click.option("--today", type=DATE, metavar="YYYY-MM-DD", help="Date to judge EOL against.")
@click.option("--check-eol", is_flag=True,
              help="Only list images past EOL or within --warn-days of it; exit 1 if any.")
@click.option("--stable", is_flag=True,
              help="Leave out what changes with the date or build id (EOL status, tags): "
                   "for committed docs.")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 if -o FILE differs from what would be written "
                   "(--check-drift, its former name, still works).")
@click.option("--wide", is_flag=True,
              help="Table: every column, however wide the terminal (default: columns are "
                   "left out to fit; never the image or its reference).")
@reference_options
@matrix_filters
@pass_context
def compat(context: Context, filters: Filters, output_format: str, report_paths: tuple[str, ...],
           output: Optional[str], warn_days: int, today: Optional[dt.datetime],
           check_eol: bool, stable: bool, check: bool, wide: bool, build_id: Optional[str],
           registry: Optional[str]) -> int:
    """The compatibility matrix: per image the driver it needs, the GPU architectures it
    supports, its EOL date and status, and its digest from a build report."""
    from ..compat.table import CompatRequest, compat_table
    from ..report import compat_formats
    from ..toolkit.facts import load_facts

    if check and not output:
        raise click.UsageError("--check compares against -o FILE (images near or past EOL: "
                               "--check-eol)")
    if stable and output_format != "markdown":
        raise click.UsageError("--stable applies to --format markdown")
    table = compat_table(CompatRequest(
        matrix_path=context.matrix_path, build_id=resolved_build_id(build_id),
        today=_today(today), warn_days=warn_days, registry=registry, filters=filters,
        report=report_paths))
    if check_eol:
        return 1 if compat_formats.eol_check(table) else 0
    if output_format == "table" and not output:
        compat_formats.show_table(table, wide=wide)
        return 0
    return 0 if compat_formats.deliver(table, output_format, load_facts().sources(), output,
                                       stable=stable, check_drift=check) else 1


@cli.command()
@click.option("--gpu", metavar="NAME", help="GPU product name: H100, A100, MI300X, ...")
@click.option("--compute-capability", metavar="X.Y", help="Instead of --gpu: e.g. 9.0.")
@click.option("--driver", metavar="VERSION", help="NVIDIA driver version, e.g. 550.54.15.")
@click.option("--node", "node_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="A node object (kubectl get node NAME -o json): read its GPU labels.")
@click.option("--report", "report_paths", multiple=True, type=click.Path(), metavar="PATH",
              help="Build report JSON, or a directory of them (repeatable, joined): also "
                   "refuse an image with a library whose GPU code "
                   "the validator read runs not on the node's GPU.")
@click.option("--emit", type=click.Choice(["k8s"]),
              help="Print a nodeSelector/affinity fragment for the best image instead.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema 1).")
@click.option("--warn-days", type=click.IntRange(min=0), default=DEFAULT_WARN_DAYS,
              show_default=True,
              help="EOL within this many days is flagged eol-soon.")
@click.option("--today", type=DATE, metavar="YYYY-MM-DD", help="Date to judge EOL against.")
@reference_options
@matrix_filters
@pass_context
def select(context: Context, filters: Filters, gpu: Optional[str],
           compute_capability: Optional[str], driver: Optional[str], node_file: Optional[str],
           report_paths: tuple[str, ...], emit: Optional[str], as_json: bool, warn_days: int,
           today: Optional[dt.datetime],
           build_id: Optional[str], registry: Optional[str]) -> int:
    """The images that run on a node, best first, and why every other image does not.
    Exits 1 when none runs."""
    from ..compat.select import SelectRequest, select_for_node
    from ..report import compat_formats

    if node_file and (gpu or compute_capability or driver):
        raise click.UsageError("--node replaces --gpu, --compute-capability and --driver")
    if emit and as_json:
        raise click.UsageError("--emit and --json are alternatives")
    answer = select_for_node(SelectRequest(
        matrix_path=context.matrix_path, build_id=resolved_build_id(build_id),
        today=_today(today), warn_days=warn_days, registry=registry, filters=filters,
        node_file=node_file, gpu=gpu, compute_capability=compute_capability, driver=driver,
        scheduling=emit == "k8s", report=report_paths))
    compat_formats.selected(answer.selection, answer.node,
                            "k8s" if emit == "k8s" else "json" if as_json else "text",
                            answer.scheduling)
    return 0 if answer.selection.runnable else 1
