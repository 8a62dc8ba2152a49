"""`aipcc-build verify` without click: the common command lines of `verify` read here, so
that a check of one image is not mostly the import of click (issue 40: within 2x of a
`skopeo inspect`). It reads only what the click command reads the same way (its options
in any order, `--opt value` and `--opt=value`, `--tls-verify=BOOL`) and declines anything
else (help, the global options, deprecated spellings, `--`, a value click's path type
refuses, an option given twice): the click command then reads it, and refuses it, as it
always has. `run` is what both call: one request, one core function, one report."""

from __future__ import annotations

import os
import stat

from .fast_lines import DECLINED, read_line

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Any, Optional

    from ..publish.verify import VerifyRequest

# The options that take a file (click.Path(dir_okay=False)), by the request field they set.
_FILES = {"--key": "key", "--authfile": "authfile"}


def parse(args: list[str]) -> Optional[tuple[VerifyRequest, bool]]:
    """(the request, --json) of ARGS, the words after `verify`; None when the click
    command must read them."""
    read = read_line(args, _FILES, {"--json": "as_json"}, _file)
    if read is None:
        return None
    refs, values = read
    from ..publish.verify import VerifyRequest

    key, authfile = values.get("key"), values.get("authfile")
    return (VerifyRequest(refs=tuple(refs), key=str(key) if key is not None else None,
                          tls_verify=bool(values.get("tls_verify", True)),
                          authfile=str(authfile) if authfile is not None else None),
            bool(values.get("as_json", False)))


def _file(field: str, value: str) -> Any:
    return value if _path_accepted(value) else DECLINED


def _path_accepted(value: str) -> bool:
    """Whether click.Path(dir_okay=False) takes VALUE as it is: a path that is missing,
    or there, readable and no directory."""
    try:
        mode = os.stat(value).st_mode
    except (OSError, ValueError):
        return value != "" and "\0" not in value
    return not stat.S_ISDIR(mode) and os.access(value, os.R_OK)


def run(request: VerifyRequest, as_json: bool) -> int:
    """Verify, report, and the exit code (1 when an image fails a check)."""
    from ..publish.verify import verify
    from ..report import verification

    result = verify(request)
    verification.verified(result, as_json)
    return 0 if result.ok else 1


def fast_main(args: list[str], ends_process: bool = False) -> Optional[int]:
    """`verify ARGS...` run without click, its exit code; None when click must read ARGS.
    Errors propagate to `cli.main`, which maps them as for every command.

    The cyclic garbage collector waits until the check ends (for good when it ENDS_PROCESS:
    the exit collects nothing either, `cli.main`'s gc.freeze): its passes over what the
    check's imports make (modules, classes, functions: nothing it could free) were 3% of
    a check of one image, and what a check makes is bounded (each answer read is) and
    mostly freed by reference counting as it goes."""
    import gc

    collecting = gc.isenabled()
    gc.disable()
    checked = False
    try:
        parsed = parse(args)
        if parsed is None:
            return None  # the click command reads ARGS, collected as every command is
        from .signals import handled

        checked = True
        with handled():
            return run(*parsed)
    finally:
        if collecting and not (checked and ends_process):
            gc.enable()
