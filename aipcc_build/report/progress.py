"""Progress and outcome of `aipcc-build matrix`: a rich live table on a terminal, plain
lines prefixed by the image key in CI, GitHub log groups and annotations on GitHub."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, TextIO

from ..environment import on_github_actions, on_gitlab_ci
from ..errors import without_credentials
from .console import interactive, rich_console, shown_path, table, warning

if TYPE_CHECKING:
    from ..imagebuild.outcomes import Event, RunResult

STEP_LINE = re.compile(r"^(?:\[\d+/\d+\] )?STEP \d+/\d+: ")
# The longest a log line is shown in a failure's tail (a step may print megabytes without a
# newline: the log file has it whole, within its cap).
SHOWN_LINE = 500
# GitLab's job log: `ESC[0Ksection_start:UNIX_TIME:NAME[collapsed=true]\rESC[0KHEADER`
# ... `ESC[0Ksection_end:UNIX_TIME:NAME\rESC[0K` folds the lines between under HEADER.
ERASE_LINE = "\x1b[0K"


def gitlab_section_name(key: str) -> str:
    """A section name GitLab takes (letters, digits, `_`, `.`, `-`) from an image key."""
    return "log_" + re.sub(r"[^A-Za-z0-9_.-]", "_", key)


class MatrixView:
    """Progress of `aipcc-build matrix` on stderr, fed the scheduler's events.

    On a terminal (outside CI) a rich live table, one row per image; otherwise plain lines
    prefixed by the image key. Failures show the last lines of their log either way.
    """

    def __init__(self, stream: Optional[TextIO] = None) -> None:
        stream = self.stream = stream or sys.stderr  # the one at the call: tests swap it
        self.keys: list[str] = []  # plan order, from the Planned event
        self.status: dict[str, str] = {}
        self.step: dict[str, str] = {}
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.containerfiles: dict[str, str] = {}  # key -> its Containerfile, from the plan
        self.github = on_github_actions(os.environ)
        self.summary_file = os.environ.get("GITHUB_STEP_SUMMARY", "") if self.github else ""
        # NO_COLOR takes colour away, nothing else (no-color.org): GitLab's sections and the
        # live view stay; the view's console draws no colour.
        self.gitlab = on_gitlab_ci(os.environ)
        self.live: Any = None
        if interactive(stream):
            from rich.live import Live

            self.live = Live(self, console=rich_console(stream), refresh_per_second=4,
                             transient=False)

    def __enter__(self) -> MatrixView:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def __call__(self, event: Event) -> None:
        from ..imagebuild.outcomes import LogLine, Planned, Retrying, Status, Warned

        if isinstance(event, Planned):
            self.keys = [build.key for build in event.plan.builds]
            self.containerfiles = {build.key: build.containerfile for build in event.plan.builds}
            self.status = {key: "queued" for key in self.keys}
            self.step = {key: "" for key in self.keys}
            return
        if isinstance(event, Warned):
            if self.live is not None:
                self.live.console.print(f"aipcc-build: warning: {event.message}",
                                        highlight=False, markup=False)
            else:
                warning(event.message)
            return
        key = event.key
        if isinstance(event, LogLine):
            if STEP_LINE.match(event.line):
                self.step[key] = event.line
                self._line(key, event.line)
        elif isinstance(event, Retrying):
            self._line(key, f"{event.action} failed ({event.error}); attempt {event.attempt} "
                            f"in {event.delay:g} s")
        else:
            self.status[key] = event.status.value
            if event.status is Status.BUILDING:
                self.started[key] = time.monotonic()
            elif event.status.final:
                self.ended[key] = time.monotonic()
            message = f": {event.message}" if event.message else ""
            self._line(key, f"{event.status.value}{message}")
            if event.log_tail or (event.log and event.status in (Status.FAILED,
                                                                 Status.PUSH_FAILED)):
                self._tail(key, event.message, event.log_tail, event.log)

    def _line(self, key: str, text: str) -> None:
        if self.live is None:
            self.stream.write(f"[{key}] {text}\n")
            self.stream.flush()

    def _tail(self, key: str, message: str, lines: Sequence[str], log: str) -> None:
        """A failed image's last log lines, unfolded, and where its whole log is: on GitHub
        an error annotation on its Containerfile and a step-summary section too; on GitLab
        an expanded section."""
        lines = [text if len(text) <= SHOWN_LINE else
                 f"{text[:SHOWN_LINE]}... ({len(text)} characters)" for text in lines]
        header = f"[{key}] failed: {message}" if message else f"[{key}] failed"
        where = f"[{key}] whole log: {shown_path(log)}" if log else ""
        if self.live is not None:
            from rich.markup import escape

            self.live.console.print(f"[bold red]{escape(header)}[/]")
            for text in lines:
                self.live.console.print(f"  {escape(text)}", highlight=False)
            if where:
                self.live.console.print(escape(where), highlight=False)
            return
        section = gitlab_section_name(key)
        if self.github:
            containerfile = self.containerfiles.get(key)
            at = f"file={os.path.relpath(containerfile)}," if containerfile else ""
            self.stream.write(f"::error {at}title={key} failed::{_annotation(message)}\n")
            self._step_summary(key, message, lines, log)
        if self.gitlab:
            self.stream.write(f"{ERASE_LINE}section_start:{int(time.time())}:{section}"
                              f"[collapsed=false]\r{ERASE_LINE}{header}\n")
        else:
            self.stream.write(header + "\n")
        if lines:
            self.stream.write(f"[{key}] its last {len(lines)} log line(s):\n")
        for text in lines:
            self.stream.write(f"[{key}] | {text}\n")
        if where:
            self.stream.write(where + "\n")
        if self.gitlab:
            self.stream.write(f"{ERASE_LINE}section_end:{int(time.time())}:{section}\r"
                              f"{ERASE_LINE}\n")
        self.stream.flush()

    def _step_summary(self, key: str, message: str, lines: Sequence[str], log: str) -> None:
        """A section of the GitHub job's summary page (GITHUB_STEP_SUMMARY) per failure."""
        if not self.summary_file:
            return
        fence = "````"
        text = (f"### {key} failed\n\n{message}\n\n" +
                (f"Log: `{shown_path(log)}`\n\n" if log else "") +
                (f"{fence}\n" + "".join(line + "\n" for line in lines) + f"{fence}\n"
                 if lines else ""))
        try:
            with open(self.summary_file, "a", encoding="utf-8") as summary:
                summary.write(without_credentials(text))
        except OSError as exc:
            warning(f"the GitHub step summary could not be written: {exc}")

    def __rich__(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        colours = {"ok": "green", "failed": "red", "push-failed": "red", "skipped": "yellow",
                   "cancelled": "yellow", "queued": "dim"}
        grid = Table("IMAGE", "STATUS", "ELAPSED", "STEP", expand=False)
        now = time.monotonic()
        for key in self.keys:
            status = self.status[key]
            elapsed = ""
            if key in self.started:
                elapsed = f"{self.ended.get(key, now) - self.started[key]:5.0f}s"
            # Text, not markup: "[1/2] STEP" would read as a style.
            grid.add_row(Text(key), Text(status, style=colours.get(status, "cyan")), elapsed,
                         Text(self.step[key][:70] if status != "ok" else ""))
        return grid


def _annotation(message: str) -> str:
    """MESSAGE as a workflow command's value: GitHub reads `%`, CR and LF as escapes."""
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _toolkits_found(toolkits: Optional[Mapping[str, Sequence[str]]]) -> str:
    if toolkits is None:
        return "-"  # not validated (it did not build)
    return "; ".join(f"{name} {', '.join(versions)}" for name, versions in toolkits.items()) \
        or "none"


def _why(message: str) -> str:
    """Why an image failed, in the summary: the first line of its message, bounded."""
    first = message.strip().splitlines()[0] if message.strip() else "-"
    return first if len(first) <= 200 else first[:200] + "..."


def matrix_summary(result: RunResult, report_path: Optional[str]) -> None:
    """The outcome on stdout, one line per image (why each one failed); the verdict on
    stderr."""
    from ..imagebuild.outcomes import Status

    why = any(item.status is not Status.OK for item in result.images)
    # The digest apart from the reference: each fits 80 columns whole, together they do not.
    table(("IMAGE", "STATUS", "TIME", "TOOLKITS FOUND", *(("WHY",) if why else ()),
           "REFERENCE", "DIGEST"), [
        (item.key, item.status.value,
         f"{item.duration:.1f}s" if item.duration is not None else "-",
         _toolkits_found(item.toolkits),
         *((_why(item.message) if item.status is not Status.OK else "",) if why else ()),
         item.image.reference, item.list_digest or item.digest or "-")
        for item in result.images
    ], keep=("IMAGE", "REFERENCE", "DIGEST"),  # every column: what was found is the result
        wide_option=None)
    counts: dict[str, int] = {}
    for item in result.images:
        counts[item.status.value] = counts.get(item.status.value, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    stopped = f" (stopped: {result.stopped_by})" if result.stopped_by else ""
    where = f"; report: {shown_path(report_path)}" if report_path else ""
    sys.stderr.write(f"{len(result.images)} image(s) in {result.end - result.start:.1f}s: "
                     f"{summary}{stopped}{where}\n")
