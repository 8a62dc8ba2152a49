"""The command line: a thin click layer. Each command parses its options, calls one core
function and hands the typed result to `report`. Heavy modules are imported inside the
commands so that `aipcc-build --version` stays as fast as importing click."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import click

from . import __version__
from .errors import AipccError

if TYPE_CHECKING:
    from .matrix import Filters
    from .model import Matrix
    from .validate import Expectation

DEFAULT_MATRIX = "matrix/aipcc.yaml"


class Context:
    """What the group passes to every command."""

    def __init__(self, matrix_path: str, debug: bool) -> None:
        self.matrix_path = matrix_path
        self.debug = debug

    def load(self) -> Matrix:
        from .matrix import load

        return load(self.matrix_path)


pass_context = click.make_pass_decorator(Context)


FILTER_OPTIONS = (
    click.option("--accelerator", "accelerators", multiple=True, metavar="NAME",
                 help="Only this accelerator (repeatable)."),
    click.option("--version", "versions", multiple=True, metavar="PREFIX",
                 help="Only versions starting with PREFIX: 12.8 matches 12.8.1 (repeatable)."),
    click.option("--os", "oses", multiple=True, metavar="OS",
                 help="Only this OS (repeatable)."),
    click.option("--kind", "kinds", multiple=True, metavar="KIND",
                 help="Only this image kind (repeatable)."),
)


def matrix_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    """The repeatable filters every command that reads the matrix takes."""

    @functools.wraps(command)
    def wrapper(*args: Any, accelerators: tuple[str, ...], versions: tuple[str, ...],
                oses: tuple[str, ...], kinds: tuple[str, ...], **kwargs: Any) -> Any:
        from .matrix import Filters

        filters = Filters(accelerators=accelerators, versions=versions, oses=oses, kinds=kinds)
        return command(*args, filters=filters, **kwargs)

    for option in reversed(FILTER_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def raw_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    """The same filters, left as tuples: `validate` REF... must not import the matrix loader
    (and yaml) just to ignore them, or a warm-cache run would be mostly imports."""
    for option in reversed(FILTER_OPTIONS):
        command = option(command)
    return command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aipcc-build")
@click.option("--matrix", "matrix_path", envvar="AIPCC_BUILD_MATRIX", default=DEFAULT_MATRIX,
              show_default=True, metavar="PATH",
              help="The matrix file (env AIPCC_BUILD_MATRIX).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, matrix_path: str, debug: bool) -> None:
    """Build, validate and publish container images for several accelerator toolkit
    versions side by side."""
    ctx.obj = Context(matrix_path, debug)


@cli.command()
@click.option("--check", is_flag=True,
              help="Write nothing; list drifted, missing and stale files; exit 1 if any.")
@matrix_filters
@pass_context
def render(context: Context, filters: Filters, check: bool) -> int:
    """Render the Containerfiles of the matrix from its templates."""
    from . import report
    from .matrix import EVERYTHING
    from .render import apply, render_all

    matrix = context.load()
    rendered = render_all(matrix, filters)
    # Stale files can only be told apart when the whole matrix was rendered.
    result = apply(matrix, rendered, check=check, remove_stale=filters == EVERYTHING)
    report.render_result(result)
    return 1 if check and result.changes else 0


@cli.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema 1).")
@click.option("--build-id", metavar="ID", help="Build id in the tag (default: from CI, or dev).")
@click.option("--registry", metavar="HOST/NAMESPACE", help="Replace the matrix's registry.")
@matrix_filters
@pass_context
def list_images(context: Context, filters: Filters, as_json: bool, build_id: Optional[str],
                registry: Optional[str]) -> int:
    """One row per image: name, kind, accelerator, version, OS, variant, reference."""
    from . import report
    from .matrix import expand, resolve_build_id

    images = expand(context.load(), build_id=resolve_build_id(build_id, os.environ),
                    registry=registry, filters=filters)
    report.image_list(images, as_json)
    return 0


@cli.command()
@click.option("--dry-run", is_flag=True, help="Print the build plan; build nothing.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: print JSON (schema 1).")
@click.option("--build-id", metavar="ID", help="Build id in the tag (default: from CI, or dev).")
@click.option("--registry", metavar="HOST/NAMESPACE", help="Replace the matrix's registry.")
@matrix_filters
@pass_context
def matrix(context: Context, filters: Filters, dry_run: bool, as_json: bool,
           build_id: Optional[str], registry: Optional[str]) -> int:
    """Build every image of the matrix, concurrently and in dependency order."""
    from . import report
    from .matrix import expand, resolve_build_id
    from .plan import make_plan

    images = expand(context.load(), build_id=resolve_build_id(build_id, os.environ),
                    registry=registry, filters=filters)
    plan = make_plan(images)
    if dry_run:
        report.plan(plan, as_json)
        return 0
    raise click.UsageError("building needs --dry-run until the scheduler lands")


def parse_expect(value: Optional[str]) -> Optional[Expectation]:
    """--expect cuda=12.8 | rocm=6.4 | cpu"""
    if value is None:
        return None
    from .validate import Expectation

    accelerator, _, version = value.partition("=")
    if not accelerator or (accelerator != "cpu" and not version):
        raise click.BadParameter("expected ACCELERATOR=VERSION (cuda=12.8) or cpu",
                                 param_hint="--expect")
    return Expectation(accelerator, version or None, source="argument")


@cli.command()
@click.argument("refs", nargs=-1, metavar="REF...")
@click.option("--expect", metavar="ACCELERATOR=VERSION",
              help="What the images must hold (cuda=12.8, rocm=6.4, cpu); default: their "
                   "ai.aipcc.* labels, else inferred.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema 1).")
@click.option("--strict-layers", is_flag=True,
              help="Evidence deleted by a later layer is a violation, not a warning.")
@click.option("--platform", metavar="OS/ARCH", help="Only this platform of an image index.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Layer scan cache (env AIPCC_BUILD_CACHE, default ~/.cache/aipcc-build).")
@click.option("--matrix", "matrix_file", metavar="PATH",
              help="Validate every image of this matrix present in local storage.")
@click.option("--build-id", metavar="ID", help="With --matrix: build id in the tag.")
@click.option("--registry", metavar="HOST/NAMESPACE", help="With --matrix: replace the registry.")
@raw_filters
@pass_context
def validate(context: Context, accelerators: tuple[str, ...], versions: tuple[str, ...],
             oses: tuple[str, ...], kinds: tuple[str, ...], refs: tuple[str, ...],
             expect: Optional[str],
             as_json: bool, strict_layers: bool, platform: Optional[str],
             cache_dir: Optional[Path], matrix_file: Optional[str], build_id: Optional[str],
             registry: Optional[str]) -> int:
    """Check that images do not mix accelerator toolkit versions.

    REF is any skopeo transport: oci:DIR[:TAG], oci-archive:FILE, docker-archive:FILE,
    docker://REF, containers-storage:REF. Exit 0 clean, 1 violations, 2 unreadable.
    """
    from . import report
    from .validate import Target, validate_targets

    if matrix_file is None and not refs:
        raise click.UsageError("give at least one REF, or --matrix FILE")
    if matrix_file is not None and refs:
        raise click.UsageError("give REFs or --matrix, not both")
    expectation = parse_expect(expect)
    if matrix_file is not None:
        from .matrix import Filters, expand, load, resolve_build_id
        from .validate import expectation_from_spec

        filters = Filters(accelerators=accelerators, versions=versions, oses=oses, kinds=kinds)
        images = expand(load(matrix_file), build_id=resolve_build_id(build_id, os.environ),
                        registry=registry, filters=filters)
        targets = []
        for image in images:
            spec_expect, allow = expectation_from_spec(image)
            targets.append(Target(f"containers-storage:{image.reference}",
                                  expectation or spec_expect, allow, name=image.key,
                                  only_if_present=True))
    else:
        targets = [Target(ref, expectation) for ref in refs]
    outcomes = validate_targets(targets, strict_layers=strict_layers, platform=platform,
                                cache_dir=cache_dir)
    report.validation(outcomes, as_json)
    return max([o.exit_code for o in outcomes] + [0])


def main(argv: Optional[list[str]] = None) -> None:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        code = cli.main(args=argv, prog_name="aipcc-build", standalone_mode=False)
    except click.exceptions.Abort:
        code = 130
    except click.ClickException as exc:
        exc.show()
        code = 2
    except AipccError as exc:
        if debug:
            raise
        from . import report

        report.error(str(exc))
        code = exc.exit_code
    sys.exit(code if isinstance(code, int) else 0)
