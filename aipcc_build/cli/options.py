"""The click group and the options several commands share. Heavy modules are imported
inside the commands so that `aipcc-build --version` stays as fast as importing click."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, Callable, Optional

import click

from .. import __version__

if TYPE_CHECKING:
    from ..matrix import Filters, Matrix

DEFAULT_MATRIX = "matrix/aipcc.yaml"
DATE = click.DateTime(formats=["%Y-%m-%d"])


class Context:
    """What the group passes to every command."""

    def __init__(self, matrix_path: str, debug: bool) -> None:
        self.matrix_path = matrix_path
        self.debug = debug

    def load(self) -> Matrix:
        from ..matrix import load

        return load(self.matrix_path)


pass_context = click.make_pass_decorator(Context)


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


def resolved_build_id(explicit: Optional[str]) -> str:
    from ..environment import resolve_build_id

    return resolve_build_id(explicit, os.environ)


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
