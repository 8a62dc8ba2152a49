"""The command line: a thin click layer. Each command parses its options, calls one core
function and hands the typed result to `report`. Heavy modules are imported inside the
commands so that `aipcc-build --version` stays as fast as importing click."""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Optional

import click

from . import __version__
from .errors import AipccError

if TYPE_CHECKING:
    from .matrix import Filters
    from .model import Matrix

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


def matrix_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    """The repeatable filters every command that reads the matrix takes."""
    options = [
        click.option("--accelerator", "accelerators", multiple=True, metavar="NAME",
                     help="Only this accelerator (repeatable)."),
        click.option("--version", "versions", multiple=True, metavar="PREFIX",
                     help="Only versions starting with PREFIX: 12.8 matches 12.8.1 (repeatable)."),
        click.option("--os", "oses", multiple=True, metavar="OS",
                     help="Only this OS (repeatable)."),
        click.option("--kind", "kinds", multiple=True, metavar="KIND",
                     help="Only this image kind (repeatable)."),
    ]

    @functools.wraps(command)
    def wrapper(*args: Any, accelerators: tuple[str, ...], versions: tuple[str, ...],
                oses: tuple[str, ...], kinds: tuple[str, ...], **kwargs: Any) -> Any:
        from .matrix import Filters

        filters = Filters(accelerators=accelerators, versions=versions, oses=oses, kinds=kinds)
        return command(*args, filters=filters, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


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


def _default_jobs() -> int:
    return min(os.cpu_count() or 1, 4)


def _build_arg(ctx: click.Context, param: click.Parameter,
               values: tuple[str, ...]) -> dict[str, str]:
    args = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"'{value}' is not NAME=VALUE", ctx, param)
        args[name] = text
    return args


@cli.command()
@click.option("--dry-run", is_flag=True, help="Print the build plan; build nothing.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: print JSON (schema 1).")
@click.option("--build-id", metavar="ID", help="Build id in the tag (default: from CI, or dev).")
@click.option("--registry", metavar="HOST/NAMESPACE", help="Replace the matrix's registry.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=_default_jobs,
              show_default="CPUs, at most 4", help="Builds at most at once.")
@click.option("--capacity", metavar="SLOT=N,...", default="",
              help="Override or add resource slots: cpu=8,memory=32Gi,gpu=0 "
                   "(default: this host's CPUs and memory).")
@click.option("--history", metavar="REPORT",
              help="Order builds by the durations in an earlier run's build report.")
@click.option("--fail-fast", is_flag=True, help="Stop everything at the first failure.")
@click.option("--retries", type=click.IntRange(min=0), default=1, show_default=True,
              help="Retries of a pull/network failure or a push, with backoff.")
@click.option("--render", "rerender", is_flag=True,
              help="Render the Containerfiles first instead of refusing stale ones.")
@click.option("--allow-eol", is_flag=True, help="Build toolkit versions past their eol date.")
@click.option("--push", is_flag=True, help="Push every image that built to its repository.")
@click.option("--tls-verify", type=click.BOOL, default=True, show_default=True,
              metavar="true|false", help="Verify the registry's TLS certificate.")
@click.option("--log-dir", default="logs", show_default=True, metavar="DIR",
              help="One log file per image: DIR/<kind>/<name>.log.")
@click.option("--report", "report_path", default="build-report.json", show_default=True,
              metavar="PATH", help="The JSON build report (schema 1).")
@click.option("--junit", "junit_path", metavar="PATH", help="Also write a JUnit XML report.")
@click.option("--pull", type=click.Choice(["always", "missing", "never"]),
              help="buildah's pull policy for base images (default: buildah's).")
@click.option("--layers/--no-layers", default=None,
              help="Cache intermediate layers (default: buildah's, BUILDAH_LAYERS).")
@click.option("--platform", metavar="OS/ARCH", help="Passed to buildah build.")
@click.option("--build-arg", "build_args", multiple=True, metavar="NAME=VALUE",
              callback=_build_arg, help="Passed to buildah build (repeatable).")
@matrix_filters
@pass_context
def matrix(context: Context, filters: Filters, dry_run: bool, as_json: bool,
           build_id: Optional[str], registry: Optional[str], jobs: int, capacity: str,
           history: Optional[str], fail_fast: bool, retries: int, rerender: bool,
           allow_eol: bool, push: bool, tls_verify: bool, log_dir: str, report_path: str,
           junit_path: Optional[str], pull: Optional[str], layers: Optional[bool],
           platform: Optional[str], build_args: dict[str, str]) -> int:
    """Build every image of the matrix, concurrently and in dependency order."""
    import datetime as dt
    import signal
    import threading

    from . import buildah, report, schedule
    from .errors import InputError
    from .matrix import expand, provenance_labels, resolve_build_id
    from .plan import make_plan
    from .render import BUILD_ID_ARG, ensure_current

    loaded = context.load()
    build_id = resolve_build_id(build_id, os.environ)
    images = expand(loaded, build_id=build_id, registry=registry, filters=filters)
    plan = make_plan(images)
    if dry_run:
        report.plan(plan, as_json)
        return 0
    if BUILD_ID_ARG in build_args:
        raise InputError(f"{BUILD_ID_ARG} comes from --build-id (it is part of every tag)",
                         field="--build-arg")
    options = schedule.ScheduleOptions(
        log_dir=log_dir, jobs=jobs,
        capacity={**schedule.detect_capacity(), **schedule.parse_capacity(capacity)},
        retries=retries, fail_fast=fail_fast, push=push, tls_verify=tls_verify,
        build_args={**build_args, BUILD_ID_ARG: build_id},
        labels=provenance_labels(os.environ), layers=layers, pull=pull, platform=platform,
        history=schedule.read_history(history) if history else {},
    )
    ensure_current(loaded, filters, rerender=rerender)
    for message in schedule.check_eol(images, dt.date.today(), allow_eol):
        report.warning(f"{message}: building it because of --allow-eol")
    schedule.check_contexts(images)
    buildah.check_version(os.environ)
    runner = buildah.BuildahRunner(os.environ)

    # Ctrl-C and SIGTERM stop the builds; the scheduler cleans up and returns what finished.
    stop = threading.Event()
    received: list[int] = []

    def interrupted(signum: int, frame: object) -> None:
        received.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with report.MatrixView(plan) as view:
            result = schedule.run(plan, options, runner, view, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    report.write_build_report(result, build_id, report_path)
    if junit_path:
        report.write_junit(result, junit_path)
    report.matrix_summary(result, report_path)
    if received:
        return 128 + received[0]
    return 0 if result.ok else 1


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
