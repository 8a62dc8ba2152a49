"""Commands that edit the matrix file: add-version, retire."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Optional

import click

from .options import DATE, Context, cli, name_values, pass_context, resolved_build_id

if TYPE_CHECKING:
    from ..compat.generated import Regenerated


@cli.command(name="add-version")
@click.argument("accelerator")
@click.argument("version")
@click.option("--native-driver", "--min-driver", "native_driver", metavar="X.Y.Z",
              help="The driver this release needs natively: NVIDIA's minimum required "
                   "driver of the release, e.g. 580.65.06 for CUDA 13.0 (older drivers may "
                   "still run it under minor-version compatibility; --min-driver is its old "
                   "name).")
@click.option("--eol", type=DATE, metavar="YYYY-MM-DD", help="End-of-life date.")
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", callback=name_values,
              help="A template variable of this version, such as cudart=12.9.79-1 "
                   "(repeatable).")
@pass_context
def add_version(context: Context, accelerator: str, version: str, native_driver: Optional[str],
                eol: Optional[dt.datetime], variables: dict[str, str]) -> int:
    """Add toolkit VERSION (X.Y.Z) of ACCELERATOR to the matrix and render its images.

    The matrix file keeps its comments and formatting; it is validated before it is
    replaced. Also regenerates the other committed files the drift checks compare (the
    Konflux files, docs/compatibility.md). Prints the new images and what to request:
    their registry repositories and wheel indexes.
    """
    from ..matrix.text_edits import NewVersion
    from ..render.version_changes import add_version
    from ..report import matrix_output

    result = add_version(context.matrix_path, NewVersion(
        accelerator=accelerator, version=version, native_driver=native_driver,
        eol=eol.date() if eol else None, vars=variables))
    matrix_output.added_version(result, _regenerated(context))
    return 0


@cli.command()
@click.argument("accelerator")
@click.argument("version")
@click.option("--eol", type=DATE, metavar="YYYY-MM-DD",
              help="End-of-life date to record (required unless --remove).")
@click.option("--remove", is_flag=True,
              help="Delete the version from the matrix and its generated Containerfiles.")
@pass_context
def retire(context: Context, accelerator: str, version: str, eol: Optional[dt.datetime],
           remove: bool) -> int:
    """Mark VERSION of ACCELERATOR end-of-life, or remove it with --remove.

    VERSION may be a prefix naming one version (12.8). Regenerates what derives from the
    matrix (Containerfiles, Konflux files, docs/compatibility.md); commit them all.
    """
    from ..matrix.text_edits import Retirement
    from ..render.version_changes import retire
    from ..report import matrix_output

    if not remove and eol is None:
        raise click.UsageError("give --eol YYYY-MM-DD (or --remove to delete the version)")
    if remove and eol is not None:
        raise click.UsageError("--remove deletes the version's entry: there is no --eol to mark")
    result = retire(context.matrix_path, Retirement(
        accelerator=accelerator, version=version, eol=eol.date() if eol else None,
        remove=remove))
    matrix_output.retired(result, _regenerated(context))
    return 0


def _regenerated(context: Context) -> Regenerated:
    """The edited matrix's other committed generated files, rewritten (the drift checks)."""
    from ..compat.generated import regenerate
    from ..report import compat_formats
    from ..toolkit.facts import load_facts
    from ..tools.runner import ProcessRunner

    facts = load_facts()
    return regenerate(context.load(), facts, build_id=resolved_build_id(None),
                      runner=ProcessRunner(), page=lambda table: compat_formats.document(
                          table, "markdown", facts.sources(), stable=True))
