"""How everything looks: rich on a terminal, plain lines in CI (or when not a TTY), JSON for
machines. Data goes to stdout, messages to stderr. The one place that decides it."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Optional, TextIO

from ..environment import in_ci
from ..errors import without_credentials

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


@contextlib.contextmanager
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
          width: Optional[int] = None) -> None:
    """A table that never cuts what people copy (KEEP: names, references): rich when styled,
    aligned plain columns otherwise. When it is wider than WIDTH (the terminal's), the
    columns of DROP go first, in that order, and the lines say which (WIDE: every column,
    however wide). A KEEP column is never shortened; others wrap."""
    width = width or terminal_width()
    columns = list(range(len(headers)))
    left_out: list[str] = []
    lengths = [max([len(headers[i])] + [len(row[i]) for row in rows]) for i in columns]
    fancy = styled()

    def total(chosen: list[int]) -> int:
        cells = sum(lengths[i] for i in chosen)
        return cells + (3 * len(chosen) + 1 if fancy else 2 * (len(chosen) - 1))

    if not wide:
        for name in drop:
            if total(columns) <= width:
                break
            if name in headers:
                columns.remove(headers.index(name))
                left_out.append(name)
    if fancy:
        from rich.table import Table
        from rich.text import Text

        grid = Table(title=title or None)
        for i in columns:
            if headers[i] in keep:
                grid.add_column(headers[i], no_wrap=True, min_width=lengths[i])
            else:
                grid.add_column(headers[i], overflow="fold")
        for row in rows:  # Text, not markup: a value holding "[x]" is no style
            grid.add_row(*(Text(row[i]) for i in columns))
        # rich shrinks a table wider than its console by cutting cells: give it at least
        # the kept columns whole and the others at their longest word (they wrap). Wider
        # than the terminal, the terminal wraps the lines, which cuts nothing.
        least = sum(lengths[i] if headers[i] in keep else
                    max(len(word) for row in [headers, *rows] for word in
                        (row[i].split() or [""]))
                    for i in columns) + 3 * len(columns) + 1
        rich_console(width=max(width, least)).print(grid)
    else:
        for row in [list(headers)] + [list(r) for r in rows]:
            sys.stdout.write("  ".join(row[i].ljust(lengths[i]) for i in columns).rstrip()
                             + "\n")
    if left_out:
        sys.stderr.write(f"(left out to fit {width} columns: {', '.join(left_out)}; "
                         "--wide shows every column)\n")


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
