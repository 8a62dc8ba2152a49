"""The one place that decides how results look: rich on a terminal, plain lines in CI
(or when not a TTY), JSON for machines. Data goes to stdout, messages to stderr."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional, TextIO

if TYPE_CHECKING:  # keep jinja2 out of commands that only print
    from .model import AllowRule, ImageSpec
    from .plan import BuildPlan
    from .render import RenderResult
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


def render_result(result: RenderResult) -> None:
    if result.checked:
        words = {"changed": "drifted", "missing": "missing", "stale": "stale"}
    else:
        words = {"changed": "updated", "missing": "created", "stale": "removed"}
    for change in result.changes:
        sys.stdout.write(f"{words[change.state]}: {shown_path(change.path)}\n")
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
