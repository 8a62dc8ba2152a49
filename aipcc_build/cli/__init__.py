"""The command line: a thin click layer. Each command turns its options into one request,
calls one core function and hands the typed result to `report`. This package is the only
place that knows the options' names: `main` maps error types to exit codes and the request
and matrix fields errors name to the options that set them."""

from __future__ import annotations

import sys
from typing import Optional

import click

from ..errors import AipccError, InputError, Interrupted
from ..report.console import masked_streams
from . import build, compat, edit, images, publish, validate  # noqa: F401  (register the commands)
from .options import cli
from .signals import handled

# Request field (as core errors name it) -> the option that sets it.
OPTION_OF_FIELD = {
    "build_id": "--build-id",
    "registry": "--registry",
    "capacity": "--capacity",
    "history": "--history",
    "report": "--report",
    "junit": "--junit",
    "build_args": "--build-arg",
    "build_timeout": "--build-timeout",
    "push_timeout": "--push-timeout",
    "push_stall": "--push-stall",
    "allow_eol": "--allow-eol",
    "min_driver": "--min-driver",
    "vars": "--var NAME=VALUE",
    "driver": "--driver",
    "gpu": "--gpu",
    "compute_capability": "--compute-capability",
    "filters.accelerators": "--accelerator",
    "filters.versions": "--version",
    "filters.oses": "--os",
    "filters.kinds": "--kind",
    "filters.names": "--only",
    "filters.platforms": "--platform",
    "to": "--to",
    "source": "--from",
    "wheels": "VARIANT=DIR",
    "root": "ROOT",
    "keep": "--keep",
    "changed_since": "--changed-since",
    "parent_build_id": "--parent-build-id",
}


def message(exc: AipccError) -> str:
    """The error's one line, naming the option where a request field is at fault."""
    option = OPTION_OF_FIELD.get(exc.field or "")
    if option is None:
        return str(exc)
    if isinstance(exc, InputError):
        # "file:line: field: message" with the option in the field's place.
        return str(InputError(exc.message, file=exc.file, line=exc.line, column=exc.column,
                              field=option))
    return f"{exc} ({option})"


def os_error_message(exc: OSError) -> str:
    """A file-system error as one line naming its path: too long a name, a read-only or
    full file system, a file where a directory is wanted, a dangling symbolic link."""
    import os
    from pathlib import Path

    what = exc.strerror or str(exc)
    if not isinstance(exc.filename, (str, bytes, os.PathLike)):
        return what
    path = os.fsdecode(exc.filename)
    link = next((str(p) for p in (Path(path), *Path(path).parents)
                 if os.path.islink(p) and not os.path.exists(p)), None)
    if link is not None and isinstance(exc, (FileNotFoundError, FileExistsError)):
        what = f"{link} is a symbolic link to a missing {os.readlink(link)}"
    elif isinstance(exc, FileExistsError):
        what = "exists and is not a directory"
    return f"{path}: {what}"


def signal_name(signum: int) -> str:
    import signal

    return signal.Signals(signum).name


def main(argv: Optional[list[str]] = None) -> None:
    """The entry point: every byte the command prints goes out with credentials masked
    (--debug's traceback too)."""
    with masked_streams():
        try:
            code = _run(argv)
        except (AipccError, OSError):  # --debug: the traceback, masked like the rest
            import traceback

            traceback.print_exc()
            code = 1
    sys.exit(code if isinstance(code, int) else 0)


def _run(argv: Optional[list[str]]) -> object:
    """The command's exit code (or what click returned), its error printed."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        with handled():
            code = cli.main(args=argv, prog_name="aipcc-build", standalone_mode=False)
    except Interrupted as exc:
        from ..report import error

        error(f"stopped by {signal_name(exc.signum)}")
        code = exc.exit_code
    except click.exceptions.Abort:
        code = 130
    except click.ClickException as exc:
        exc.show()
        code = 2
    except AipccError as exc:
        if debug:
            raise
        from ..report import error

        error(message(exc))
        code = exc.exit_code
    except OSError as exc:
        if debug:
            raise
        from ..report import error

        error(os_error_message(exc))
        code = 2
    return code
