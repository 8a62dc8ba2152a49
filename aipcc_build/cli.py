"""The command line: a thin click layer. Each command parses its options, calls one core
function and hands the typed result to `report`. Heavy modules are imported inside the
commands so that `aipcc-build --version` stays as fast as importing click."""

from __future__ import annotations

import datetime as dt
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
    from .model import ImageSpec, Matrix
    from .schedule import ValidationOutcome
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
    click.option("--only", "names", multiple=True, metavar="NAME|KEY",
                 help="Only this image: a name (cuda-12.8-ubi9, every kind) or a key "
                      "(builder/cuda-12.8-ubi9, one image) (repeatable)."),
)


def matrix_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    """The repeatable filters every command that reads the matrix takes."""

    @functools.wraps(command)
    def wrapper(*args: Any, accelerators: tuple[str, ...], versions: tuple[str, ...],
                oses: tuple[str, ...], kinds: tuple[str, ...], names: tuple[str, ...],
                **kwargs: Any) -> Any:
        from .matrix import Filters

        filters = Filters(accelerators=accelerators, versions=versions, oses=oses, kinds=kinds,
                          names=names)
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


def reference_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--build-id and --registry: what turns a matrix image into a full reference."""
    command = click.option("--registry", metavar="HOST/NAMESPACE",
                           help="Replace the matrix's registry.")(command)
    return click.option("--build-id", metavar="ID",
                        help="Build id in the tag (default: from CI, or dev).")(command)


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
@reference_options
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


def _name_values(ctx: click.Context, param: click.Parameter,
                 values: tuple[str, ...]) -> dict[str, str]:
    """Repeated NAME=VALUE options as a dict."""
    pairs = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"'{value}' is not NAME=VALUE", ctx, param)
        pairs[name] = text
    return pairs


@cli.command()
@click.option("--dry-run", is_flag=True, help="Print the build plan; build nothing.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: print JSON (schema 1).")
@reference_options
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
@click.option("--parent-build-id", metavar="ID",
              help="Build id of from_image parents this run does not build (a change-aware "
                   "plan left them out): children are built FROM them.")
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
              callback=_name_values, help="Passed to buildah build (repeatable).")
@matrix_filters
@pass_context
def matrix(context: Context, filters: Filters, dry_run: bool, as_json: bool,
           build_id: Optional[str], registry: Optional[str], jobs: int, capacity: str,
           history: Optional[str], fail_fast: bool, retries: int, rerender: bool,
           allow_eol: bool, push: bool, tls_verify: bool, log_dir: str, report_path: str,
           junit_path: Optional[str], pull: Optional[str], layers: Optional[bool],
           platform: Optional[str], build_args: dict[str, str],
           parent_build_id: Optional[str]) -> int:
    """Build every image of the matrix, concurrently and in dependency order."""
    import datetime as dt
    import signal
    import threading

    from . import buildah, report, schedule
    from .errors import InputError
    from .matrix import expand, provenance_labels, resolve_build_id
    from .plan import make_plan, outside_parents
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
        parent_references=outside_parents(
            plan, expand(loaded, build_id=parent_build_id, registry=registry))
        if parent_build_id else {},
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
            result = schedule.run(plan, options, runner, view, stop, validate=_validate_built)
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


def _validate_built(image: ImageSpec, image_id: str) -> ValidationOutcome:
    """The validator as the scheduler's step between build and push."""
    from . import report
    from .schedule import ValidationOutcome
    from .validate import validate_built

    outcome = validate_built(image, image_id)
    toolkits: dict[str, set[str]] = {}
    for verdict in outcome.verdicts:
        for toolkit, versions in verdict.toolkits.items():
            toolkits.setdefault(toolkit, set()).update(versions)
    return ValidationOutcome(ok=outcome.exit_code == 0,
                             message=report.validation_problems(outcome),
                             toolkits={k: sorted(v) for k, v in toolkits.items()})


DATE = click.DateTime(formats=["%Y-%m-%d"])


@cli.command(name="add-version")
@click.argument("accelerator")
@click.argument("version")
@click.option("--min-driver", metavar="X.Y.Z", help="Oldest driver the toolkit supports.")
@click.option("--eol", type=DATE, metavar="YYYY-MM-DD", help="End-of-life date.")
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", callback=_name_values,
              help="A template variable of this version, such as cudart=12.9.79-1 "
                   "(repeatable).")
@pass_context
def add_version(context: Context, accelerator: str, version: str, min_driver: Optional[str],
                eol: Optional[dt.datetime], variables: dict[str, str]) -> int:
    """Add toolkit VERSION (X.Y.Z) of ACCELERATOR to the matrix and render its images.

    The matrix file keeps its comments and formatting; it is validated before it is
    replaced. Prints the new images and a request for their registry repositories.
    """
    from . import report
    from .edit import NewVersion, add_version

    result = add_version(context.matrix_path, NewVersion(
        accelerator=accelerator, version=version, min_driver=min_driver,
        eol=eol.date() if eol else None, vars=variables))
    report.added_version(result)
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
    """Mark VERSION of ACCELERATOR end-of-life, or remove it with --remove."""
    from . import report
    from .edit import Retirement, retire

    if not remove and eol is None:
        raise click.UsageError("give --eol YYYY-MM-DD (or --remove to delete the version)")
    if remove and eol is not None:
        raise click.UsageError("--remove deletes the version's entry: there is no --eol to mark")
    result = retire(context.matrix_path, Retirement(
        accelerator=accelerator, version=version, eol=eol.date() if eol else None,
        remove=remove))
    report.retired(result)
    return 0


PLAN_FORMATS = ("json", "github", "gitlab", "tekton")


@cli.command()
@click.option("--format", "output_format", type=click.Choice(PLAN_FORMATS), default="json",
              show_default=True, help="json: every image with all fields; github, gitlab, "
                                      "tekton: a CI document fanning builds out (docs/ci).")
@click.option("--changed-since", metavar="GIT_REV",
              help="Only images whose inputs changed since GIT_REV, and their dependents.")
@reference_options
@matrix_filters
@pass_context
def plan(context: Context, filters: Filters, output_format: str, changed_since: Optional[str],
         build_id: Optional[str], registry: Optional[str]) -> int:
    """The build plan as data for people or CI engines."""
    from . import ci, git, report
    from .changes import select
    from .matrix import resolve_build_id
    from .plan import make_plan, project_path

    matrix = context.load()
    build = resolve_build_id(build_id, os.environ)
    build_plan = make_plan(select(matrix, build_id=build, registry=registry, filters=filters,
                                  changed_since=changed_since))
    command = ci.JobCommand(matrix_path=project_path(matrix, matrix.path), build_id=build,
                            registry=registry)
    if output_format == "json":
        report.plan_json(matrix, build_plan, changed_since)
    elif output_format == "github":
        report.ci_document(ci.github(build_plan), build_plan)
    elif output_format == "gitlab":
        report.ci_document(ci.gitlab(build_plan, command), build_plan)
    else:
        directory = os.path.dirname(os.path.abspath(matrix.path))
        source = ci.GitSource(url=git.remote_url(directory), revision=git.head_commit(directory))
        report.ci_document(ci.tekton(matrix, build_plan, command, source), build_plan)
    return 0


def _today(value: Optional[dt.datetime]) -> dt.date:
    return value.date() if value is not None else dt.date.today()


@cli.command()
@click.option("--format", "output_format", type=click.Choice(["table", "markdown", "json", "html"]),
              default="table", show_default=True, help="Output format.")
@click.option("--report", "build_report", type=click.Path(dir_okay=False), metavar="FILE",
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
@reference_options
@matrix_filters
@pass_context
def compat(context: Context, filters: Filters, output_format: str, build_report: Optional[str],
           output: Optional[str], warn_days: int, today: Optional[dt.datetime], check: bool,
           stable: bool, check_drift: bool, build_id: Optional[str],
           registry: Optional[str]) -> int:
    """The compatibility matrix: per image the driver it needs, the GPU architectures it
    supports, its EOL date and status, and its digest from a build report."""
    from . import compat_report, report
    from .compat import build_compat_table, eol_findings, load_build_report
    from .fsutil import same_content, write_atomic
    from .matrix import expand, resolve_build_id
    from .toolkit_facts import load_facts

    if check_drift and not output:
        raise click.UsageError("--check-drift compares against -o FILE")
    if stable and output_format != "markdown":
        raise click.UsageError("--stable applies to --format markdown")
    facts = load_facts()
    images = expand(context.load(), build_id=resolve_build_id(build_id, os.environ),
                    registry=registry, filters=filters)
    digests = load_build_report(build_report) if build_report else None
    table = build_compat_table(images, facts, today=_today(today), warn_days=warn_days,
                               digests=digests)
    if check:
        findings = eol_findings(table)
        sys.stdout.write(compat_report.render_eol_findings(findings))
        sys.stderr.write(f"{len(table.rows)} image(s) checked against EOL on "
                         f"{table.today.isoformat()}: {len(findings)} past EOL or within "
                         f"{warn_days} days\n")
        return 1 if findings else 0
    if output_format == "table" and not output:
        report.table(*compat_report.table_columns(table))
        for warning in table.warnings:
            report.warning(warning)
        return 0
    if output_format == "markdown":
        text = compat_report.render_markdown(table, facts.sources(), stable=stable)
    elif output_format == "json":
        text = compat_report.render_json(table)
    elif output_format == "html":
        text = compat_report.render_html(table)
    else:
        text = compat_report.render_text(table)
    if check_drift:
        assert output is not None  # checked above
        if not same_content(output, text):
            report.error(f"{report.shown_path(output)} is out of date: rerun without "
                         "--check-drift")
            return 1
        sys.stderr.write(f"{report.shown_path(output)} is up to date\n")
    elif output:
        write_atomic(output, text)
        report.wrote(output)
    else:
        sys.stdout.write(text)
    return 0


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
    from . import compat_report
    from .matrix import expand, resolve_build_id
    from .select import node_from_flags, node_from_k8s, scheduling_constraints, select_images
    from .toolkit_facts import load_facts

    if node_file and (gpu or compute_capability or driver):
        raise click.UsageError("--node replaces --gpu, --compute-capability and --driver")
    if emit and as_json:
        raise click.UsageError("--emit and --json are alternatives")
    facts = load_facts()
    node = node_from_k8s(facts, node_file) if node_file else node_from_flags(
        facts, gpu=gpu, compute_capability=compute_capability, driver=driver)
    images = expand(context.load(), build_id=resolve_build_id(build_id, os.environ),
                    registry=registry, filters=filters)
    selection = select_images(images, facts, node, today=_today(today), warn_days=warn_days)
    if emit == "k8s":
        if selection.runnable:
            best = selection.runnable[0].image
            sys.stdout.write(compat_report.render_k8s(best, scheduling_constraints(best, facts)))
    elif as_json:
        sys.stdout.write(compat_report.render_selection_json(selection))
    else:
        sys.stdout.write(compat_report.render_selection_text(selection))
    if not selection.runnable:
        from . import report

        report.error(f"no image of the matrix runs on {node.describe()}")
        return 1
    return 0

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
@reference_options
@raw_filters
@pass_context
def validate(context: Context, accelerators: tuple[str, ...], versions: tuple[str, ...],
             oses: tuple[str, ...], kinds: tuple[str, ...], names: tuple[str, ...],
             refs: tuple[str, ...],
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

        filters = Filters(accelerators=accelerators, versions=versions, oses=oses, kinds=kinds,
                          names=names)
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
