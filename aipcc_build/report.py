"""The one place that decides how results look: rich on a terminal, plain lines in CI
(or when not a TTY), JSON for machines. Data goes to stdout, messages to stderr."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, TextIO

from .fsutil import write_atomic

if TYPE_CHECKING:  # keep jinja2 out of commands that only print
    from .edit import AddVersionResult, RetireResult
    from .model import AllowRule, ImageSpec, Matrix
    from .plan import BuildPlan
    from .render import RenderResult
    from .schedule import Event, RunResult
    from .validate import Finding, ImageVerdict, Outcome

JSON_SCHEMA = 1


def interactive(stream: Optional[TextIO] = None) -> bool:
    """rich live views only on a terminal outside CI; rich does not detect CI by itself."""
    return (stream or sys.stdout).isatty() and not os.environ.get("CI")


def emit_json(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"schema": JSON_SCHEMA, **payload}, indent=2) + "\n")


def error(message: str) -> None:
    sys.stderr.write(f"aipcc-build: error: {message}\n")


def warning(message: str) -> None:
    sys.stderr.write(f"aipcc-build: warning: {message}\n")


def wrote(path: str) -> None:
    sys.stderr.write(f"wrote {shown_path(path)}\n")


def image_record(image: ImageSpec) -> dict[str, Any]:
    return {
        "name": image.name,
        "key": image.key,
        "kind": image.kind,
        "accelerator": image.accelerator,
        "version": image.version,
        "os": image.os,
        "variant": image.variant,
        "repository": image.repository,
        "tag": image.tag,
        "reference": image.reference,
        "template": image.template,
        "containerfile": image.containerfile,
        "depends_on": image.depends_on,
    }


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


def image_list(images: Sequence[ImageSpec], as_json: bool) -> None:
    if as_json:
        emit_json({"images": [image_record(image) for image in images]})
        return
    table(
        ("NAME", "KIND", "ACCELERATOR", "VERSION", "OS", "VARIANT", "REFERENCE", "TEMPLATE"),
        [(i.name, i.kind, i.accelerator, i.version or "-", i.os, i.variant, i.reference,
          i.template) for i in images],
    )


def shown_path(path: str) -> str:
    """Paths below the working directory are shown relative to it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _render_changes(result: RenderResult) -> None:
    if result.checked:
        words = {"changed": "drifted", "missing": "missing", "stale": "stale"}
    else:
        words = {"changed": "updated", "missing": "created", "stale": "removed"}
    for change in result.changes:
        sys.stdout.write(f"{words[change.state]}: {shown_path(change.path)}\n")


def render_result(result: RenderResult) -> None:
    _render_changes(result)
    total = len(result.changes) + result.unchanged
    if result.checked:
        verdict = "up to date" if not result.changes else \
            f"{len(result.changes)} file(s) differ: run 'aipcc-build render'"
        sys.stderr.write(f"{total} Containerfile(s) checked, {verdict}\n")
    else:
        sys.stderr.write(f"{total} Containerfile(s): {len(result.changes)} written or removed, "
                         f"{result.unchanged} unchanged\n")


def plan(build_plan: BuildPlan, as_json: bool) -> None:
    if as_json:
        emit_json({"waves": [[dict(image_record(b.image), needs=list(b.needs)) for b in wave]
                             for wave in build_plan.waves]})
        return
    for number, wave in enumerate(build_plan.waves, start=1):
        sys.stdout.write(f"wave {number} ({len(wave)} build(s) can run together):\n")
        for build in wave:
            after = f"  after {', '.join(build.needs)}" if build.needs else ""
            sys.stdout.write(f"  {build.image.key}  {build.image.reference}{after}\n")


def _rule_record(rule: AllowRule) -> dict[str, Any]:
    return {"reason": rule.reason, "toolkit": rule.toolkit, "component": rule.component,
            "versions": list(rule.versions), "path": rule.path,
            "where": str(rule.where) if rule.where else None}


def _finding_record(finding: Finding) -> dict[str, Any]:
    return {"status": finding.status, "toolkit": finding.toolkit, "version": finding.version,
            "component": finding.component, "component_version": finding.component_version,
            "evidence": finding.evidence, "path": finding.path,
            "layer_digest": finding.layer_digest, "reason": finding.reason}


def _verdict_record(outcome: Outcome, verdict: ImageVerdict) -> dict[str, Any]:
    expected = verdict.expected
    return {
        "ref": verdict.ref,
        "name": outcome.target.name,
        "platform": verdict.platform,
        "digest": verdict.digest,
        "verdict": verdict.verdict,
        "expected": {"accelerator": expected.accelerator, "version": expected.version,
                     "variant": expected.variant, "source": expected.source}
        if expected else None,
        "toolkits": {k: list(v) for k, v in verdict.toolkits.items()},
        "layers": verdict.layers,
        "cached_layers": verdict.cached_layers,
        "layers_read": verdict.layers_read,
        "error": verdict.error,
        "counts": {s: verdict.count(s)
                   for s in ("violation", "unmapped", "warning", "allowed", "ok")},
        "findings": [_finding_record(f) for f in verdict.findings],
        "stale_rules": [_rule_record(r) for r in verdict.stale_rules],
    }


def _found(verdict: ImageVerdict) -> str:
    return "; ".join(f"{k} {', '.join(v)}" for k, v in verdict.toolkits.items()) or "none"


def _finding_line(finding: Finding) -> str:
    what = " ".join(x for x in (finding.toolkit, finding.version) if x)
    component = " ".join(x for x in (finding.component, finding.component_version) if x)
    layer = f" [layer {finding.layer_digest[:19]}]" if finding.layer_digest else ""
    head = f"{what}: " if what else ""
    return f"{finding.status}: {head}{component} ({finding.evidence}) at {finding.path}" \
           f"{layer}: {finding.reason}"


def validation_problems(outcome: Outcome) -> str:
    """Why an image failed validation, one finding per line, for its build log and report."""
    if outcome.error:
        return outcome.error
    return "\n".join(_finding_line(finding) for verdict in outcome.verdicts
                     for finding in verdict.findings if finding.status in ("violation", "unmapped"))


def _annotate(outcome: Outcome) -> None:
    """GitHub Actions annotations, one per problem, so they show on the run's summary."""
    def line(level: str, message: str) -> None:
        clean = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        sys.stdout.write(f"::{level} title=aipcc-build validate::{clean}\n")

    if outcome.error:
        line("error", f"{outcome.target.ref}: {outcome.error}")
    for verdict in outcome.verdicts:
        where = f"{verdict.ref} ({verdict.platform})"
        for finding in verdict.findings:
            if finding.status in ("violation", "unmapped"):
                line("error", f"{where}: {_finding_line(finding)}")
            elif finding.status == "warning":
                line("warning", f"{where}: {_finding_line(finding)}")
        for rule in verdict.stale_rules:
            line("warning", f"{where}: allow rule matched nothing (stale): {rule.reason}")


def validation(outcomes: Sequence[Outcome], as_json: bool) -> None:
    """Verdicts of `validate`: JSON, a rich table on a terminal, or plain lines."""
    if as_json:
        emit_json({
            "images": [_verdict_record(o, v) for o in outcomes for v in o.verdicts],
            "unreadable": [{"ref": o.target.ref, "name": o.target.name, "error": o.error}
                           for o in outcomes if o.error],
            "skipped": [{"ref": o.target.ref, "name": o.target.name}
                        for o in outcomes if o.skipped],
        })
        return
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for outcome in outcomes:
            _annotate(outcome)
    rows = []
    for outcome in outcomes:
        if outcome.error:
            error(f"{outcome.target.ref}: {outcome.error}")
        if outcome.skipped:
            warning(f"{outcome.target.name or outcome.target.ref}: not in local storage, skipped")
        for verdict in outcome.verdicts:
            rows.append((verdict.ref, verdict.platform, str(verdict.expected or "-"),
                         _found(verdict), str(len(verdict.findings)), verdict.verdict))
    if interactive():
        table(("IMAGE", "PLATFORM", "EXPECTED", "FOUND", "EVIDENCE", "VERDICT"), rows,
              title="aipcc-build validate")
    else:
        for ref, platform, expected, found, evidence, result in rows:
            sys.stdout.write(f"{ref} {platform}: {result} (expected {expected}; found {found}; "
                             f"{evidence} evidence)\n")
    for outcome in outcomes:
        for verdict in outcome.verdicts:
            shown = [f for f in verdict.findings if f.status != "ok"]
            for finding in shown:
                sys.stdout.write(f"  {verdict.ref} {verdict.platform}: {_finding_line(finding)}\n")
            for rule in verdict.stale_rules:
                where = f" ({rule.where})" if rule.where else ""
                sys.stdout.write(f"  {verdict.ref} {verdict.platform}: stale allow rule{where}: "
                                 f"{rule.reason}\n")


def added_version(result: AddVersionResult) -> None:
    """The new images, their files, and a registry request ready to paste into a ticket."""
    sys.stdout.write(f"New images for {result.accelerator} {result.version}:\n")
    for image in result.images:
        sys.stdout.write(f"  {image.key}  {image.reference}\n")
    _render_changes(result.rendered)
    sys.stdout.write(
        "\nRegistry repositories to request (paste into a ticket):\n\n"
        f"Please create the following {len(result.repositories)} container image "
        f"repositories. They hold the {result.accelerator} {result.version} images of "
        f"{result.product.name} {result.product.version} and must exist before CI pushes "
        "to them for the first time.\n\n")
    for image in result.images:
        sys.stdout.write(f"- {image.repository}  ({image.kind} image, {result.accelerator} "
                         f"{result.version} on {image.os})\n")
    sys.stderr.write(f"{shown_path(result.matrix_path)}: added {result.accelerator} "
                     f"{result.version}; commit it with the new Containerfiles\n")


def retired(result: RetireResult) -> None:
    verb = "Removed" if result.removed else f"End of life {result.eol} for"
    sys.stdout.write(f"{verb} {result.accelerator} {result.version}: "
                     f"{len(result.images)} image(s)\n")
    for image in result.images:
        sys.stdout.write(f"  {image.key}  {image.repository}\n")
    if result.rendered is not None:
        _render_changes(result.rendered)
    sys.stderr.write(f"{shown_path(result.matrix_path)}: updated; commit it"
                     f"{' with containerfiles/' if result.removed else ''}\n")


def plan_json(matrix: Matrix, build_plan: BuildPlan, changed_since: str | None) -> None:
    from .plan import build_context, project_path

    emit_json({
        "changed_since": changed_since,
        "images": [
            dict(image_record(b.image),
                 containerfile=project_path(matrix, b.image.containerfile),
                 context=project_path(matrix, build_context(b.image)),
                 needs=list(b.needs), wave=b.wave + 1)
            for b in build_plan.builds
        ],
    })
    if not build_plan.builds:
        sys.stderr.write("the plan selects no image: nothing to build\n")


def ci_document(text: str, build_plan: BuildPlan) -> None:
    """A CI engine's document on stdout; an empty plan is said out loud on stderr."""
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if not build_plan.builds:
        sys.stderr.write("the plan selects no image: nothing to build\n")


# ---- aipcc-build matrix -----------------------------------------------------------------

STEP_LINE = re.compile(r"^(?:\[\d+/\d+\] )?STEP \d+/\d+: ")
REPORT_SCHEMA = 1


class MatrixView:
    """Progress of `aipcc-build matrix` on stderr, fed the scheduler's events.

    On a terminal (outside CI) a rich live table, one row per image; otherwise plain lines
    prefixed by the image key. Failures show the last lines of their log either way.
    """

    def __init__(self, build_plan: BuildPlan, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.keys = [build.image.key for build in build_plan.builds]
        self.status = {key: "queued" for key in self.keys}
        self.step = {key: "" for key in self.keys}
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.github = bool(os.environ.get("GITHUB_ACTIONS"))
        self.live: Any = None
        if interactive(stream):
            from rich.console import Console
            from rich.live import Live

            self.live = Live(self, console=Console(file=stream), refresh_per_second=4,
                             transient=False)

    def __enter__(self) -> MatrixView:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def __call__(self, event: Event) -> None:
        from .schedule import LogLine, Retrying, Status

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
            if event.log_tail:
                self._tail(key, event.message, event.log_tail)

    def _line(self, key: str, text: str) -> None:
        if self.live is None:
            self.stream.write(f"[{key}] {text}\n")
            self.stream.flush()

    def _tail(self, key: str, message: str, lines: Sequence[str]) -> None:
        header = f"[{key}] last {len(lines)} line(s) of its log:"
        if self.live is not None:
            from rich.markup import escape

            self.live.console.print(f"[bold red]{escape(header)}[/]")
            for text in lines:
                self.live.console.print(f"  {escape(text)}", highlight=False)
            return
        if self.github:
            self.stream.write(f"::error title={key} failed::{message}\n::group::{header}\n")
        else:
            self.stream.write(header + "\n")
        for text in lines:
            self.stream.write(f"[{key}] | {text}\n")
        if self.github:
            self.stream.write("::endgroup::\n")
        self.stream.flush()

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


def _iso(epoch: Optional[float]) -> Optional[str]:
    if epoch is None:
        return None
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="milliseconds")


def _seconds(value: Optional[float]) -> Optional[float]:
    return round(value, 3) if value is not None else None


def build_report_data(result: RunResult, build_id: str) -> dict[str, Any]:
    """The --report document (schema 1, documented in docs/commands/matrix.md)."""
    return {
        "schema": REPORT_SCHEMA,
        "build_id": build_id,
        "start": _iso(result.start),
        "end": _iso(result.end),
        "duration": round(result.end - result.start, 3),
        "stopped_by": result.stopped_by,
        "images": [
            {
                "name": item.image.name,
                "key": item.image.key,
                "kind": item.image.kind,
                "reference": item.image.reference,
                "status": item.status.value,
                "message": item.message,
                "image_id": item.image_id or None,
                "digest": item.digest or None,
                "start": _iso(item.start),
                "end": _iso(item.end),
                "duration": _seconds(item.duration),
                "build_duration": _seconds(item.build_duration),
                "log": item.log,
                "retries": item.retries,
                "toolkits": {name: list(versions) for name, versions in item.toolkits.items()}
                if item.toolkits is not None else None,
            }
            for item in result.images
        ],
    }


def write_build_report(result: RunResult, build_id: str, path: str) -> None:
    text = json.dumps(build_report_data(result, build_id), indent=2) + "\n"
    write_atomic(path, text)


def write_junit(result: RunResult, path: str) -> None:
    """One testcase per image, failures with the tail of their log, for CI dashboards."""
    from xml.etree import ElementTree as ET

    from .schedule import Status

    failed = {Status.FAILED, Status.PUSH_FAILED}
    suite = ET.Element("testsuite", {
        "name": "aipcc-build matrix",
        "tests": str(len(result.images)),
        "failures": str(sum(item.status in failed for item in result.images)),
        "errors": "0",
        "skipped": str(sum(item.status in (Status.SKIPPED, Status.CANCELLED)
                           for item in result.images)),
        "time": f"{result.end - result.start:.3f}",
        "timestamp": _iso(result.start) or "",
    })
    for item in result.images:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"aipcc-build.{item.image.kind}",
            "name": item.image.name,
            "time": f"{item.duration or 0:.3f}",
        })
        if item.status in failed:
            failure = ET.SubElement(case, "failure", {"message": item.message,
                                                      "type": item.status.value})
            failure.text = "\n".join(item.log_tail)
        elif item.status is not Status.OK:
            ET.SubElement(case, "skipped", {"message": f"{item.status.value}: {item.message}"})
        ET.SubElement(case, "system-out").text = f"log: {item.log}"
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    write_atomic(path, ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n")


def _toolkits_found(toolkits: Optional[Mapping[str, Sequence[str]]]) -> str:
    if toolkits is None:
        return "-"  # not validated (it did not build)
    return "; ".join(f"{name} {', '.join(versions)}" for name, versions in toolkits.items()) \
        or "none"


def matrix_summary(result: RunResult, report_path: Optional[str]) -> None:
    """The outcome on stdout, one line per image; the verdict on stderr."""
    table(("IMAGE", "STATUS", "TIME", "TOOLKITS FOUND", "REFERENCE"), [
        (item.image.key, item.status.value,
         f"{item.duration:.1f}s" if item.duration is not None else "-",
         _toolkits_found(item.toolkits),
         item.image.reference + (f"@{item.digest}" if item.digest else ""))
        for item in result.images
    ])
    counts: dict[str, int] = {}
    for item in result.images:
        counts[item.status.value] = counts.get(item.status.value, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    stopped = f" (stopped: {result.stopped_by})" if result.stopped_by else ""
    where = f"; report: {shown_path(report_path)}" if report_path else ""
    sys.stderr.write(f"{len(result.images)} image(s) in {result.end - result.start:.1f}s: "
                     f"{summary}{stopped}{where}\n")
