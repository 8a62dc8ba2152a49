"""How everything looks: rich on a terminal, plain lines in CI (or when not a TTY), JSON for
machines. Data goes to stdout, messages to stderr. The one place that decides it."""

from __future__ import annotations

import os
import sys

from ..environment import in_ci
from ..errors import without_credentials
from ..functional import contextmanager

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any, Optional, TextIO

JSON_SCHEMA = 1
# The command that regenerates every derived file: what each failed drift check names.
REGENERATE_COMMAND = "aipcc-build regenerate"


def interactive(stream: Optional[TextIO] = None) -> bool:
    """rich live views only on a terminal outside CI; rich does not detect CI by itself."""
    return (stream or sys.stdout).isatty() and not in_ci(os.environ)


def styled(stream: Optional[TextIO] = None) -> bool:
    """Whether output to STREAM carries styles (colours, bold): NO_COLOR (no-color.org: any
    non-empty value) turns them off, FORCE_COLOR on, else only on an interactive terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return interactive(stream)


def rich_console(stream: Optional[TextIO] = None, **options: Any) -> Any:
    """The one way to make a rich Console: under NO_COLOR it writes no escape code at all
    (rich's own NO_COLOR handling drops colours but keeps bold and dim)."""
    from rich.console import Console

    if os.environ.get("NO_COLOR"):
        options["color_system"] = None
    elif os.environ.get("FORCE_COLOR"):
        options.setdefault("force_terminal", True)
    return Console(file=stream or sys.stdout, **options)


def terminal_width() -> int:
    """The width tables fit: the terminal's, COLUMNS when set, else 120 (a pipe)."""
    import shutil

    return shutil.get_terminal_size(fallback=(120, 24)).columns


class _Masked:
    """A text stream whose every write goes through `errors.without_credentials`."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(without_credentials(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def masked_streams() -> Iterator[None]:
    """Within: whatever any part of a command prints to stdout or stderr (messages, errors,
    tables, JSON, a tool's output passed on) is shown with its credentials masked."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Masked(saved[0]), _Masked(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def document(text: str) -> None:
    """A generated document (a CI engine's, a table of the matrix) on stdout, verbatim: it
    is built from the matrix, whose fields the loader keeps free of credentials, and
    masking would rewrite what only looks like them (Tekton's `docker://${IMAGE}@$DIGEST`)."""
    stream = sys.stdout
    (stream.stream if isinstance(stream, _Masked) else stream).write(text)


def emit_json(payload: dict[str, Any]) -> None:
    import json

    sys.stdout.write(json.dumps({"schema": JSON_SCHEMA, **payload}, indent=2) + "\n")


def error(message: str) -> None:
    sys.stderr.write(f"aipcc-build: error: {message}\n")


def warning(message: str) -> None:
    sys.stderr.write(f"aipcc-build: warning: {message}\n")


def note(message: str) -> None:
    """Something a person should know about the run, not an error nor a warning."""
    sys.stderr.write(f"aipcc-build: {message}\n")


def wrote(path: str) -> None:
    """Say what was written, and when it is outside the working directory, say so."""
    outside = os.path.relpath(path).startswith("..")
    sys.stderr.write(f"wrote {shown_path(path)}"
                     f"{' (outside the working directory)' if outside else ''}\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str = "", *,
          keep: Sequence[str] = (), drop: Sequence[str] = (), wide: bool = False,
          width: Optional[int] = None, wide_option: Optional[str] = "--wide") -> None:
    """A table that fits WIDTH (the terminal's, or COLUMNS) and never cuts what people copy
    (KEEP: names, references): rich when styled, aligned plain columns otherwise. Wider
    than WIDTH, the columns of DROP go first, in that order, and a note says which (and
    that WIDE_OPTION, the command's option when it has one, shows every column); then the
    other columns wrap at their spaces; and when even that does not fit, each row becomes
    a block of `column: value` lines. A KEEP value is never broken, even when it alone is
    wider than WIDTH. WIDE: every column, however wide."""
    width = width or terminal_width()
    fancy = styled()
    columns = list(range(len(headers)))
    left_out: list[str] = []
    lengths = [max([len(headers[i])] + [len(row[i]) for row in rows]) for i in columns]

    def total(chosen: Sequence[int], sizes: Sequence[int]) -> int:
        cells = sum(sizes[i] for i in chosen)
        return cells + (3 * len(chosen) + 1 if fancy else 2 * (len(chosen) - 1))

    if not wide:
        for name in drop:
            if total(columns, lengths) <= width:
                break
            if name in headers:
                columns.remove(headers.index(name))
                left_out.append(name)
    sizes = list(lengths)
    if not wide:
        _narrowed(sizes, columns, [headers[i] in keep for i in range(len(headers))],
                  [headers, *rows], width - total(columns, [0] * len(headers)))
    if not wide and total(columns, sizes) > width:
        _blocks(headers, rows, columns, keep, width)
    elif fancy:
        _rich_table(headers, rows, columns, keep, sizes, title, max(width, total(columns, sizes)))
    else:
        _plain_table(headers, rows, columns, sizes)
    if left_out:
        hint = f"; {wide_option} shows every column" if wide_option else ""
        sys.stderr.write("\n".join(_wrapped(f"(left out to fit {width} columns: "
                                             f"{', '.join(left_out)}{hint})", width)) + "\n")


def _narrowed(sizes: list[int], columns: Sequence[int], kept: Sequence[bool],
              cells: Sequence[Sequence[str]], room: int) -> None:
    """SIZES of the columns not KEPT made smaller, the widest first, until they take ROOM
    characters (or each is down to its longest word: a cell wraps at its spaces only)."""
    floor = {i: max(len(word) for row in cells for word in (row[i].split() or [""]))
             for i in columns if not kept[i]}
    while sum(sizes[i] for i in columns) > room:
        shrinkable = [i for i in floor if sizes[i] > floor[i]]
        if not shrinkable:
            return
        widest = max(shrinkable, key=lambda i: sizes[i])
        sizes[widest] -= 1


def _wrapped(text: str, size: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, size, break_long_words=False, break_on_hyphens=False) or [""]


def _plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
                 columns: Sequence[int], sizes: Sequence[int]) -> None:
    for row in [list(headers)] + [list(r) for r in rows]:
        cells = [_wrapped(row[i], sizes[i]) if len(row[i]) > sizes[i] else [row[i]]
                 for i in columns]
        for line in range(max(len(cell) for cell in cells)):
            sys.stdout.write("  ".join((cell[line] if line < len(cell) else "").ljust(sizes[i])
                                       for i, cell in zip(columns, cells)).rstrip() + "\n")


def _rich_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
                columns: Sequence[int], keep: Sequence[str], sizes: Sequence[int],
                title: str, width: int) -> None:
    from rich.table import Table
    from rich.text import Text

    grid = Table(title=title or None)
    for i in columns:
        if headers[i] in keep:
            grid.add_column(headers[i], no_wrap=True, min_width=sizes[i])
        else:
            grid.add_column(headers[i], max_width=sizes[i], overflow="fold")
    for row in rows:  # Text, not markup: a value holding "[x]" is no style
        grid.add_row(*(Text(row[i]) for i in columns))
    rich_console(width=width).print(grid)


def _blocks(headers: Sequence[str], rows: Sequence[Sequence[str]], columns: Sequence[int],
            keep: Sequence[str], width: int) -> None:
    """Each row as a block: its KEEP values on a line of their own (one each when together
    they do not fit), then `column: value` lines wrapped to WIDTH."""
    kept = [i for i in columns if headers[i] in keep]
    others = [i for i in columns if headers[i] not in keep]
    label = max((len(headers[i]) for i in others), default=0)
    for number, row in enumerate(rows):
        if number:
            sys.stdout.write("\n")
        heading = "  ".join(row[i] for i in kept)
        sys.stdout.write(heading + "\n" if len(heading) <= width or len(kept) < 2 else
                         "".join(row[i] + "\n" for i in kept))
        for i in others:
            prefix = f"  {headers[i]}:".ljust(label + 4)
            lines = _wrapped(row[i], max(width - len(prefix), 10))
            sys.stdout.write(prefix + lines[0] + "\n" +
                             "".join(" " * len(prefix) + line + "\n" for line in lines[1:]))


def deliver(text: str, output: Optional[str], *, check_drift: bool = False) -> bool:
    """A generated document: TEXT on stdout; or written to OUTPUT (atomically); or, with
    CHECK_DRIFT, compared with OUTPUT and nothing written. False when OUTPUT drifted."""
    if output is None:
        document(text)
        return True
    from ..fsutil import same_content, write_atomic  # here: most output goes to stdout

    if check_drift:
        if not same_content(output, text):
            error(f"{shown_path(output)} is out of date: rerun without --check, or run "
                  f"'{REGENERATE_COMMAND}' for every derived file")
            return False
        sys.stderr.write(f"{shown_path(output)} is up to date\n")
        return True
    write_atomic(output, text)
    wrote(output)
    return True


def shown_path(path: str) -> str:
    """Paths below the working directory are shown relative to it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative
