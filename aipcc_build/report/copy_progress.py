"""How promote and mirror look: one line per event (rich colours on a terminal, plain lines
prefixed by the image in CI), the plan of a dry run on stdout, a summary on stderr."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Callable

from .console import interactive, rich_console, shown_path

if TYPE_CHECKING:
    from ..publish.mirror import MirrorResult
    from ..publish.promote import PromoteResult
    from ..publish.transfer import Event

_STYLE = {"copied": "green", "skipped": "dim", "failed": "bold red", "retry": "yellow",
          "copying": "cyan", "planned": "blue"}


def event_printer() -> Callable[[Event], None]:
    """The on_event callback of promote and mirror (called from several threads)."""
    lock = threading.Lock()
    if interactive(sys.stderr):
        console = rich_console(sys.stderr, highlight=False)

        def show(event: Event) -> None:
            counter = f"[{event.index}/{event.total}] " if event.total else ""
            extra = f": {event.message}" if event.message else ""
            with lock:
                console.print(f"{counter}[{_STYLE.get(event.kind, '')}]{event.kind}[/] "
                              f"{event.key} -> {event.dest}{extra}", markup=True)
        return show

    def line(event: Event) -> None:
        counter = f" ({event.index}/{event.total})" if event.total else ""
        extra = f": {event.message}" if event.message else ""
        with lock:
            sys.stderr.write(f"{event.key}: {event.kind} {event.dest}{counter}{extra}\n")
            sys.stderr.flush()
    return line


def promoted(result: PromoteResult, as_json: bool = False) -> None:
    """The summary on stderr; on stdout the release manifest (AS_JSON), else the plan of a
    dry run."""
    if as_json:
        from ..publish.promote import manifest_text

        sys.stdout.write(manifest_text(result))
    elif result.dry_run:
        done = {(c.key, c.dest) for c in result.skipped}
        for item in result.planned:
            state = "present" if (item.key, item.dest) in done else "copy"
            sys.stdout.write(f"{state}\t{item.source}\t{item.dest}\n")
    sys.stderr.write(f"promote {result.build_id}: {len(result.planned)} tag(s), "
                     f"{len(result.copied)} copied, {len(result.skipped)} already there"
                     f"{' (dry run: nothing copied)' if result.dry_run else ''}"
                     f"{'' if result.dry_run else ', every tag read back'}\n")


def mirrored(result: MirrorResult, as_json: bool = False) -> None:
    """The files written on stdout (AS_JSON: every image's outcome and the files, schema
    1), the failures and a summary on stderr."""
    counts = {status: sum(1 for o in result.outcomes if o.status == status)
              for status in ("copied", "skipped", "failed")}
    for outcome in result.failed:
        sys.stderr.write(f"failed: {outcome.image.key}: {outcome.message}\n")
    if as_json:
        from .console import emit_json

        emit_json({"ok": not result.failed,
                   "images": [{"key": o.image.key, "reference": o.dest,
                               "digest": o.image.digest, "status": o.status,
                               "message": o.message} for o in result.outcomes],
                   "written": list(result.written)})
    for path in () if as_json else result.written:
        sys.stdout.write(f"{shown_path(path)}\n")
    sys.stderr.write(f"mirror: {len(result.outcomes)} image(s), {counts['copied']} copied, "
                     f"{counts['skipped']} already there, {counts['failed']} failed\n")


def paths(written: Sequence[str]) -> list[str]:
    return [shown_path(p) for p in written]
