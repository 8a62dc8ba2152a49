"""The command line: a thin click layer. Each command turns its options into one request,
calls one core function and hands the typed result to `report`. This package is the only
place that knows the options' names: `main` maps error types to exit codes and the request
and matrix fields errors name to the options that set them. click is imported once a
command line needs it: the common `verify` and `validate REF...` lines are read without it
(`verify_args`, `validate_args`)."""

from __future__ import annotations

import sys

from ..errors import AipccError, InputError, Interrupted
from ..functional import cache
from ..report.console import masked_streams

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Optional

    import click

# Request fields named unlike the command parameter that sets them; "filters.X" is X.
FIELD_PARAMETERS = {"report": "report_path", "junit": "junit_path", "vars": "variables",
                    "manifest": "manifest_path"}
# Top-level keys of the matrix file named like a command parameter.
MATRIX_KEYS = frozenset({"platforms", "registry", "output", "templates"})


@cache
def options_by_parameter() -> dict[str, str]:
    """Each command parameter's name -> how a user writes it: its long option (with the
    value's form where it is NAME=VALUE), or an argument's metavar. Read from the commands
    themselves, so a renamed option cannot leave a message naming the old one."""
    import click

    from .options import cli

    shown: dict[str, str] = {}
    for command in cli.commands.values():
        for param in command.params:
            if param.name is None or not param.expose_value:
                continue
            if isinstance(param, click.Argument):
                text = (param.metavar or param.name.upper()).split("|")[0]
                text = text[:-3] if text.endswith("...") else text
            else:
                # The first long spelling (later ones are deprecated aliases), and the
                # negative of a boolean flag.
                longs = [o for o in param.opts if o.startswith("--")][:1]
                text = "/".join(longs + [o for o in param.secondary_opts
                                         if o.startswith("--")])
                if param.metavar == "NAME=VALUE":  # the pair form is the point
                    text = f"{text} {param.metavar}"
            shown.setdefault(param.name, text)
    return shown


def option_of_field(field: str) -> Optional[str]:
    """The option that sets a request field (as core errors name it), None for a field of
    a file."""
    name = field[len("filters."):] if field.startswith("filters.") else field
    return options_by_parameter().get(FIELD_PARAMETERS.get(field, name))


def message(exc: AipccError) -> str:
    """The error's one line, naming the option where a request field is at fault (not
    where a line of the matrix is: its `platforms:` is no --platform)."""
    at_matrix_key = getattr(exc, "line", None) is not None and exc.field in MATRIX_KEYS
    option = None if at_matrix_key else option_of_field(exc.field or "")
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

    from ..errors import quoted

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
    return f"{quoted(path)}: {what}"


def color(environ: Mapping[str, str]) -> Optional[bool]:
    """click's own styling (its warnings, --help): NO_COLOR off, FORCE_COLOR on, else
    click's choice (on for a terminal)."""
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    return None


def usage_message(exc: click.ClickException, args: list[str]) -> str:
    """A refused command line as one line, with where to read more (not click's usage
    block); each word of ARGS holding a control character quoted where click echoes it."""
    from ..errors import quoted

    text = exc.format_message()
    values = (w.partition("=")[2] if w.startswith("--") and "=" in w else w for w in args)
    for word in {v for v in values if not v.isprintable()}:
        text = text.replace(f"'{word}'", word).replace(word, quoted(word))
    context = getattr(exc, "ctx", None)
    if context is not None:
        text += f" (see '{context.command_path} --help')"
    return text


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
    if argv is None:
        # The process ends here: its objects are frozen out of the collector's sight, so
        # the interpreter's exit does not search them all for cycles once more (a tenth of
        # a `verify` of one image). Files are closed where they are written (fsutil), and
        # temporary directories by their own exit hooks, which run before.
        import gc

        gc.freeze()
    sys.exit(code if isinstance(code, int) else 0)


def _run(argv: Optional[list[str]]) -> object:
    """The command's exit code (or what click returned), its error printed."""
    args = argv if argv is not None else sys.argv[1:]
    debug = "--debug" in args
    try:
        code: object = None
        if args[:1] == ["verify"]:
            from .verify_args import fast_main

            code = fast_main(args[1:], ends_process=argv is None)
        elif args[:1] == ["validate"]:
            from .validate_args import fast_main as fast_validate

            code = fast_validate(args[1:])
        if code is None:
            code = _click_run(args)
    except Interrupted as exc:
        from ..report import error

        error(f"stopped by {signal_name(exc.signum)}"
              + "".join(f"; {line}" for line in exc.done))
        code = exc.exit_code
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
    except ValueError as exc:
        # A path holding a NUL byte: open() and os.stat() refuse it with a ValueError, not
        # an OSError, wherever it is opened (click's path types, a core reader).
        option = option_holding_nul(args) if "null" in str(exc) else None
        if option is None or debug:
            raise
        from ..report import error

        error(f"{option}: a path cannot hold a NUL byte")
        code = 2
    return code


def option_holding_nul(args: list[str]) -> Optional[str]:
    """The option of ARGS whose value holds a NUL byte (`--key VALUE` or `--key=VALUE`),
    or the argument itself; None when no word holds one."""
    for index, word in enumerate(args):
        if "\0" not in word:
            continue
        name, equals, _ = word.partition("=")
        if word.startswith("--") and equals:
            return name
        before = args[index - 1] if index else ""
        return before if before.startswith("--") else "a path argument"
    return None


def _click_run(args: list[str]) -> object:
    """ARGS read and run by the click group: the command's exit code (or what click
    returned), a refused command line printed (exit 2)."""
    import os

    import click

    from .options import cli

    if not args:  # no command: the help is the answer, on stderr, exit 2 (click 8.1 says 0)
        with click.Context(cli, info_name="aipcc-build", color=color(os.environ)) as context:
            sys.stderr.write(context.get_help() + "\n")
        return 2
    try:
        return cli.main(args=args, prog_name="aipcc-build", standalone_mode=False,
                        color=color(os.environ))
    except click.exceptions.Abort:
        return 130
    except click.ClickException as exc:
        from ..report import error

        if isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):
            sys.stderr.write(exc.format_message() + "\n")  # no command: the help is the answer
        else:
            error(usage_message(exc, args))
        return 2
