"""The click group and the options several commands share. Heavy modules are imported
inside the commands so that `aipcc-build --version` stays as fast as importing click."""

from __future__ import annotations

import functools
import importlib
import os
import stat
from typing import TYPE_CHECKING, Any, Callable, Optional

import click

from .. import __version__

if TYPE_CHECKING:
    from ..matrix import Filters, Matrix

DEFAULT_MATRIX = "matrix/aipcc.yaml"


class Date(click.DateTime):
    """YYYY-MM-DD, refused in one line that says the format."""

    name = "date"

    def convert(self, value: Any, param: Optional[click.Parameter],
                ctx: Optional[click.Context]) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(f"'{value}' is not a date YYYY-MM-DD", param, ctx)


DATE = Date(formats=["%Y-%m-%d"])


class LocalPath(click.ParamType):
    """A file (KIND "file") or a directory ("directory") of this machine, which need not
    exist, as `click.Path(dir_okay=False)` or `click.Path(file_okay=False)` takes it
    (refused when one of the other kind, or an unreadable one, is there), given as a
    string (a warm validation loads no pathlib). click.Path looks its name up in a
    translation catalog as it is defined, and gettext searches the catalogs anew at each
    look-up: a start of `validate` paid about a million instructions for each of its three
    (issue 37)."""

    def __init__(self, kind: str) -> None:
        self.name = kind

    def convert(self, value: Any, param: Optional[click.Parameter],
                ctx: Optional[click.Context]) -> Any:
        try:
            found = os.stat(value)
        except OSError:
            return value
        shown = click.format_filename(value)
        if self.name == "file" and stat.S_ISDIR(found.st_mode):
            self.fail(f"File {shown!r} is a directory.", param, ctx)
        if self.name == "directory" and stat.S_ISREG(found.st_mode):
            self.fail(f"Directory {shown!r} is a file.", param, ctx)
        if not os.access(value, os.R_OK):
            self.fail(f"{self.name.title()} {shown!r} is not readable.", param, ctx)
        return value

    def shell_complete(self, ctx: click.Context, param: click.Parameter,
                       incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(incomplete, type="dir" if self.name == "directory" else "file")]


HELP_TEXT = "Show this message and exit."


def _show_help(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(ctx.get_help(), color=ctx.color)
        ctx.exit()


def _help_option(command: click.Command, ctx: click.Context) -> Optional[click.Option]:
    """COMMAND's -h/--help, made once as click makes it, but with its text not looked up in
    a translation catalog: click's looks it up as each run parses its command line, and
    gettext searches the catalogs anew at each look-up (and loads `locale` for it)."""
    names = command.get_help_option_names(ctx)
    if not names or not command.add_help_option:
        return None
    # One object for as long as the names are the same: click orders the eager callbacks
    # by the objects it was given.
    made: Optional[click.Option] = command.__dict__.get("_help_without_catalog")
    if made is None or made.opts != names:
        made = click.Option(names, is_flag=True, expose_value=False, is_eager=True,
                            callback=_show_help, help=HELP_TEXT)
        command.__dict__["_help_without_catalog"] = made
    return made


class Context:
    """What the group passes to every command. `matrix_given`: the matrix was named (by
    --matrix before or after the command, or AIPCC_BUILD_MATRIX), not the default."""

    def __init__(self, matrix_path: str, debug: bool, matrix_given: Optional[str]) -> None:
        self.matrix_path = matrix_path
        self.debug = debug
        self.matrix_given = matrix_given  # "option", "environment" or None

    def load(self) -> Matrix:
        from ..matrix import load

        return load(self.matrix_path)


pass_context = click.make_pass_decorator(Context)

# One example per command, shown at the end of its --help (and in docs/reference/).
EXAMPLES = {
    "add-version": "aipcc-build add-version cuda 13.0.1 --min-driver 580.82.07 "
                   "--eol 2027-08-31",
    "clean": "aipcc-build clean",
    "compat": "aipcc-build compat --format markdown --stable -o docs/compatibility.md "
              "--check",
    "index": "aipcc-build index /srv/wheels cuda12.9-ubi9=dist/cuda12.9 cpu-ubi9=dist/cpu",
    "list": "aipcc-build list --accelerator cuda --version 12.9",
    "matrix": "aipcc-build matrix --accelerator cuda --push --registry "
              "registry.example:5000/aipcc --build-id 42",
    "merge-reports": "aipcc-build merge-reports reports/ -o build-report.json",
    "mirror": "aipcc-build mirror --report release.json --to "
              "oci-archive:release.tar",
    "plan": "aipcc-build plan --format gitlab --changed-since origin/main --build-id "
            "$CI_PIPELINE_IID",
    "reference": "aipcc-build reference --check",
    "regenerate": "aipcc-build regenerate",
    "promote": "aipcc-build promote --report reports/ --to quay.io/aipcc/release --json",
    "render": "aipcc-build render --check",
    "retire": "aipcc-build retire cuda 12.8 --eol 2026-12-31",
    "select": "aipcc-build select --gpu H100 --driver 575.57.08",
    "validate": "aipcc-build validate --expect cuda=12.9 "
                "quay.io/aipcc/builder/cuda-12.9-ubi9:3.0-dev",
    "verify": "aipcc-build verify --key release.pub "
              "quay.io/aipcc/release/cuda-12.9-ubi9:3.0-42",
}

# Spellings still accepted, each with a warning naming the one to write instead.
BOOLEAN_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
DEPRECATED_OPTIONS = {("compat", "--check-drift"): "--check"}
# Commands whose output format is a --format choice: `--json` is `--format json` there,
# the one JSON spelling of every command.
FORMAT_COMMANDS = frozenset({"compat", "plan"})


def _current_spelling(command: str, args: list[str]) -> list[str]:
    """ARGS in the spellings the commands define: `--tls-verify=false|true` (podman's,
    skopeo's and buildah's: accepted as they are), `--json` where the format is a
    --format choice; deprecated ones with a warning: `--tls-verify false` (a separate
    word) and the renamed options."""
    from ..report import warning

    out: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            out += [arg, *rest]
            break
        name, equals, word = arg.partition("=")
        renamed = DEPRECATED_OPTIONS.get((command, name))
        if renamed is not None:
            warning(f"{name} is deprecated: write {renamed}")
            out.append(renamed + equals + word)
            continue
        if arg == "--json" and command in FORMAT_COMMANDS:
            out += ["--format", "json"]
            continue
        if name != "--tls-verify":
            out.append(arg)
            continue
        if not equals:
            following = next(rest, None)
            if following is None or following.lower() not in BOOLEAN_WORDS:
                out += [arg] if following is None else [arg, following]
                continue
            word = following
        if word.lower() not in BOOLEAN_WORDS:
            raise click.BadParameter(f"'{word}' is not true or false (write --tls-verify or "
                                     "--no-tls-verify)", param_hint="--tls-verify")
        flag = "--tls-verify" if BOOLEAN_WORDS[word.lower()] else "--no-tls-verify"
        if not equals:
            warning(f"--tls-verify {word} is deprecated: write --tls-verify={word} or {flag}")
        out.append(flag)
    return out


def _named_matrix(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> None:
    if value is not None:
        context = ctx.find_object(Context)
        if context is not None:
            context.matrix_path, context.matrix_given = value, "option"


def _debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    context = ctx.find_object(Context)
    if value and context is not None:
        context.debug = True


class Command(click.Command):
    """Every command: its example at the end of --help, the global --matrix and --debug
    also after the command (READS_MATRIX False: not --matrix), deprecated spellings
    accepted with a warning."""

    def __init__(self, *args: Any, reads_matrix: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        example = EXAMPLES.get(self.name or "")
        if example is not None:
            self.epilog = f"Example:\n\n\b\n  {example}"
        if reads_matrix:
            self.params.append(click.Option(
                ["--matrix", "global_matrix"], metavar="PATH", expose_value=False,
                callback=_named_matrix, help="The matrix file, as before the command."))
        self.params.append(click.Option(["--debug", "global_debug"], is_flag=True,
                                        expose_value=False, callback=_debug,
                                        help="Show tracebacks for errors."))

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _current_spelling(self.name or "", args))

    get_help_option = _help_option


# Each command -> the module of this package that defines it. A command's module is
# imported when the command runs (or --help lists it): `--version`, and a run of one
# command, import no other command's options and defaults.
COMMAND_MODULES = {
    "add-version": "versions", "clean": "build", "compat": "compat",
    "index": "publish", "list": "images", "matrix": "build", "merge-reports": "publish",
    "mirror": "publish", "plan": "images", "promote": "publish", "reference": "reference",
    "regenerate": "images", "render": "images", "retire": "versions", "select": "compat",
    "validate": "validate", "verify": "verify",
}


class Group(click.Group):
    """The program: its commands loaded on first use (`commands`: all of them)."""

    command_class = Command
    get_help_option = _help_option

    @property
    def commands(self) -> dict[str, click.Command]:
        for module in sorted(set(COMMAND_MODULES.values())):
            importlib.import_module(f"{__package__}.{module}")
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = value

    def add_command(self, cmd: click.Command, name: Optional[str] = None) -> None:
        self._commands[name or cmd.name or ""] = cmd

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        module = COMMAND_MODULES.get(cmd_name)
        if module is not None:
            importlib.import_module(f"{__package__}.{module}")
        return self._commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def invoke(self, ctx: click.Context) -> Any:
        # The signal handlers (`signals.handled`) are in place while a command runs: the
        # program's `--version` and `--help` end before, and load no `signal`.
        from .signals import handled

        with handled():
            return super().invoke(ctx)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # `aipcc-build --version 12.8 list`: the program's --version would swallow the run.
        named = next((i for i, arg in enumerate(args) if arg in COMMAND_MODULES), None)
        if named is not None and "--version" in args[:named]:
            value = args[args.index("--version") + 1]
            shown = f" {value}" if value != args[named] else ""
            raise click.UsageError(
                f"--version before the command prints aipcc-build's version; to select "
                f"toolkit versions put it after the command: aipcc-build {args[named]} "
                f"--version{shown}", ctx)
        return super().parse_args(ctx, args)


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"aipcc-build, version {__version__}", color=ctx.color)
        ctx.exit()


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Example:\n\n\b\n  aipcc-build --matrix matrix/demo.yaml list")
# Not click.version_option: its texts are looked up in a translation catalog as the
# group is defined, which loads `locale` and searches for catalogs on every start.
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_show_version, help="Show the version and exit.")
@click.option("--matrix", "matrix_path", envvar="AIPCC_BUILD_MATRIX", default=DEFAULT_MATRIX,
              show_default=True, metavar="PATH",
              help="The matrix file (env AIPCC_BUILD_MATRIX; also after the command).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, matrix_path: str, debug: bool) -> None:
    """Build, validate and publish container images for several accelerator toolkit
    versions side by side."""
    from click.core import ParameterSource

    source = ctx.get_parameter_source("matrix_path")
    given = {ParameterSource.COMMANDLINE: "option",
             ParameterSource.ENVIRONMENT: "environment"}.get(source) if source else None
    ctx.obj = Context(matrix_path, debug, given)


def tls_verify_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The TLS switch: --tls-verify/--no-tls-verify, and --tls-verify=true|false as podman,
    skopeo and buildah write it (`--tls-verify false` is a deprecated alias)."""
    return click.option("--tls-verify/--no-tls-verify", default=True, show_default=True,
                        help=help_text + " Also --tls-verify=true|false.")


AUTHFILE_HELP = ("Containers auth file (default: REGISTRY_AUTH_FILE, or the containers "
                 "default auth.json).")


def authfile_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--authfile FILE: the value of an `authfile` parameter."""
    return click.option("--authfile", type=click.Path(dir_okay=False), metavar="FILE",
                        help=AUTHFILE_HELP)(command)


def _export_authfile(ctx: click.Context, param: click.Parameter,
                     value: Optional[str]) -> None:
    if value is None:
        return
    before = os.environ.get("REGISTRY_AUTH_FILE")
    os.environ["REGISTRY_AUTH_FILE"] = value

    def restore() -> None:  # a caller in the same process (a test) gets its own back
        if before is None:
            os.environ.pop("REGISTRY_AUTH_FILE", None)
        else:
            os.environ["REGISTRY_AUTH_FILE"] = before
    ctx.call_on_close(restore)


def authfile_for_tools(command: Callable[..., Any]) -> Callable[..., Any]:
    """--authfile FILE for a command whose registry access is buildah's, skopeo's and the
    registry check's: each reads REGISTRY_AUTH_FILE, which the option sets."""
    return click.option("--authfile", type=LocalPath("file"), metavar="FILE",
                        expose_value=False, callback=_export_authfile,
                        help=AUTHFILE_HELP)(command)


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


# `validate` has a --platform of its own (a platform of an image index), hence apart.
PLATFORM_FILTER = click.option(
    "--platform", "platforms", multiple=True, metavar="OS/ARCH",
    help="Only this platform of each image (linux/amd64, linux/arm64; repeatable).")


def matrix_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    """The repeatable filters every command that reads the matrix takes."""

    @functools.wraps(command)
    def wrapper(*args: Any, accelerators: tuple[str, ...], versions: tuple[str, ...],
                oses: tuple[str, ...], kinds: tuple[str, ...], names: tuple[str, ...],
                platforms: tuple[str, ...], **kwargs: Any) -> Any:
        filters = make_filters(accelerators, versions, oses, kinds, names, platforms)
        return command(*args, filters=filters, **kwargs)

    for option in reversed((*FILTER_OPTIONS, PLATFORM_FILTER)):
        wrapper = option(wrapper)
    return wrapper


def make_filters(accelerators: tuple[str, ...], versions: tuple[str, ...],
                 oses: tuple[str, ...], kinds: tuple[str, ...], names: tuple[str, ...],
                 platforms: tuple[str, ...] = ()) -> Filters:
    from ..matrix import Filters

    return Filters(accelerators=accelerators, versions=versions, oses=oses, kinds=kinds,
                   names=names, platforms=platforms)


def raw_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    """The same filters, left as tuples for `make_filters`: a command that reads the matrix
    only for some of its uses (`validate` REF..., `mirror --report`) must not import the
    matrix package just to ignore them, or a run on a warm cache would be mostly imports."""
    for option in reversed(FILTER_OPTIONS):
        command = option(command)
    return command


def reference_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--build-id and --registry: what turns a matrix image into a full reference."""
    command = click.option("--registry", metavar="HOST/NAMESPACE",
                           help="Replace the matrix's registry.")(command)
    return click.option("--build-id", metavar="ID",
                        help="Build id in the tag (default: from CI, or dev).")(command)


def resolved_build_id(explicit: Optional[str], *, required_in_ci: bool = False) -> str:
    """The build id: given, else the CI engine's (which, said on stderr), else `dev`. In CI
    with REQUIRED_IN_CI, `dev` is refused: jobs of a pipeline would all tag the same."""
    from ..environment import CI_BUILD_ID_VARIABLES, build_id_and_source, in_ci

    build_id, variable = build_id_and_source(explicit, os.environ)
    if variable is not None and required_in_ci:
        from ..report import note

        note(f"build id {build_id} (from {variable})")
    elif explicit is None and required_in_ci and in_ci(os.environ):
        from ..errors import InputError

        raise InputError(f"in CI (CI is set) the build id must be given: none of "
                         f"{', '.join(CI_BUILD_ID_VARIABLES)} is set, and 'dev' would tag "
                         f"every pipeline's images alike", field="build_id")
    return build_id


def name_values(ctx: click.Context, param: click.Parameter,
                values: tuple[str, ...]) -> dict[str, str]:
    """Repeated NAME=VALUE options as a dict."""
    pairs = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"'{value}' is not NAME=VALUE", ctx, param)
        pairs[name] = text
    return pairs


def given_matrix_path(context: Context) -> Optional[str]:
    """The matrix path when the user named one (--matrix or AIPCC_BUILD_MATRIX), None when
    it is only the default: a command that reads a build report takes what the build was
    made with from the report, never from a default matrix."""
    root = click.get_current_context().find_root()
    source = root.get_parameter_source("matrix_path")
    return None if source in (None, click.core.ParameterSource.DEFAULT) else context.matrix_path
