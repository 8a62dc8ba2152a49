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


def interactive(stream: Optional[TextIO] = None) -> bool:
    """rich live views only on a terminal outside CI; rich does not detect CI by itself."""
    return (stream or sys.stdout).isatty() and not in_ci(os.environ)


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


def wrote(path: str) -> None:
    """Say what was written, and when it is outside the working directory, say so."""
    outside = os.path.relpath(path).startswith("..")
    sys.stderr.write(f"wrote {shown_path(path)}"
                     f"{' (outside the working directory)' if outside else ''}\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str = "") -> None:
    """A table: rich on a terminal, aligned plain columns otherwise."""
    if interactive():
        from rich.console import Console
        from rich.table import Table

        grid = Table(*headers, title=title or None)
        for row in rows:
            grid.add_row(*row)
        Console().print(grid)
        return
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for row in [list(headers)] + [list(r) for r in rows]:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")


def deliver(text: str, output: Optional[str], *, check_drift: bool = False) -> bool:
    """A generated document: TEXT on stdout; or written to OUTPUT (atomically); or, with
    CHECK_DRIFT, compared with OUTPUT and nothing written. False when OUTPUT drifted."""
    if output is None:
        document(text)
        return True
    from ..fsutil import same_content, write_atomic  # here: most output goes to stdout

    if check_drift:
        if not same_content(output, text):
            error(f"{shown_path(output)} is out of date: rerun without --check-drift")
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
