"""Verdicts of `validate`: JSON, a rich table on a terminal, plain lines, and GitHub
annotations when running on GitHub Actions."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from ..environment import on_github_actions
from ..errors import quoted
from ..validate.gpu_code import runs_on, summary
from .console import emit_json, error, interactive, table, terminal_width, warning

if TYPE_CHECKING:
    from ..matrix import AllowRule
    from ..validate import Finding, ImageVerdict, Outcome
    from ..validate.matrix_run import ValidationRun
    from ..validate.requirements import RequirementsVerdict
    from ..validate.results import DeviceCode


def _rule_record(rule: AllowRule) -> dict[str, Any]:
    return {"reason": rule.reason, "toolkit": rule.toolkit, "component": rule.component,
            "versions": list(rule.versions), "path": rule.path,
            "where": str(rule.where) if rule.where else None}


def _finding_record(finding: Finding) -> dict[str, Any]:
    return {"status": finding.status, "toolkit": finding.toolkit, "version": finding.version,
            "component": finding.component, "component_version": finding.component_version,
            "evidence": finding.evidence, "path": finding.path,
            "layer_digest": finding.layer_digest, "distribution": finding.distribution,
            "reason": finding.reason}


def _verdict_record(outcome: Outcome, verdict: ImageVerdict) -> dict[str, Any]:
    expected = verdict.expected
    return {
        "ref": verdict.ref,
        "name": outcome.target.name,
        "platform": verdict.platform,
        "digest": verdict.digest,
        "verdict": verdict.verdict,
        "expected": {"accelerator": expected.accelerator, "version": expected.version,
                     "variant": expected.variant, "source": expected.source,
                     "index": expected.index}
        if expected else None,
        "toolkits": {k: list(v) for k, v in verdict.toolkits.items()},
        "layers": verdict.layers,
        "cached_layers": verdict.cached_layers,
        "layers_read": verdict.layers_read,
        "error": verdict.error,
        "counts": {s: verdict.count(s)
                   for s in ("violation", "warning", "allowed", "ok")},
        "findings": [_finding_record(f) for f in verdict.findings],
        "stale_rules": [_rule_record(r) for r in verdict.stale_rules],
        "gpu_code": summary(verdict.gpu_code),
        "gpu_archs": list(verdict.gpu_archs),
        "gpu_code_files": [_device_code_record(code, verdict.gpu_archs)
                           for code in verdict.gpu_code],
    }


def _device_code_record(code: DeviceCode, archs: Sequence[str]) -> dict[str, Any]:
    from ..toolkit.gpu_archs import family_of  # only an image with device code gets here

    return {"path": code.path, "distribution": code.distribution,
            "sass": list(code.sass), "ptx": list(code.ptx), "gfx": list(code.gfx),
            "evidence": code.detail,
            "runs_on": {arch: runs_on(code, arch) for arch in archs
                        if (family_of(arch) == "rocm") == bool(code.gfx)}}


def gpu_code_line(verdict: ImageVerdict) -> Optional[str]:
    """One line on the image's GPU code; None for an image without GPU code, toolkit or
    expected architectures."""
    found = summary(verdict.gpu_code)
    gpu = verdict.expected is not None and verdict.expected.accelerator in ("cuda", "rocm")
    if not found:
        return "gpu code: none compiled (kernels, if any, are compiled at run time)" \
            if gpu or verdict.gpu_archs else None
    parts = []
    cuda, rocm = found.get("cuda", {}), found.get("rocm", {})
    if cuda.get("sass"):
        parts.append(f"SASS {' '.join(cuda['sass'])}")
    if cuda.get("ptx"):
        parts.append(f"PTX {' '.join(cuda['ptx'])}")
    if rocm:
        parts.append(f"ROCm {' '.join(rocm['gfx'])}")
    files = len(verdict.gpu_code)
    judged = f"; judged against {', '.join(verdict.gpu_archs)}" if verdict.gpu_archs else ""
    return f"gpu code: {'; '.join(parts)} ({files} file{'s' if files > 1 else ''}{judged})"


def _found(verdict: ImageVerdict) -> str:
    return "; ".join(f"{k} {', '.join(v)}" for k, v in verdict.toolkits.items()) or "none"


def _annotate(outcome: Outcome, allow_missing: bool) -> None:
    """GitHub Actions annotations, one per problem, so they show on the run's summary."""
    def line(level: str, message: str) -> None:
        clean = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        sys.stdout.write(f"::{level} title=aipcc-build validate::{clean}\n")

    if outcome.skipped:  # not checked: it fails the run unless missing images are allowed
        line("warning" if allow_missing else "error",
             f"{outcome.target.name or outcome.target.ref}: not found ({outcome.target.ref}), "
             "not validated")
    if outcome.error:
        line("error", f"{quoted(outcome.target.ref)}: {outcome.error}")
    for verdict in outcome.verdicts:
        where = f"{verdict.ref} ({verdict.platform})"
        if verdict.error:
            line("error", f"{where}: unreadable: {verdict.error}")
        for finding in verdict.findings:
            if finding.status == "violation":
                line("error", f"{where}: {finding.line()}")
            elif finding.status == "warning":
                line("warning", f"{where}: {finding.line()}")
        for rule in verdict.stale_rules:
            line("warning", f"{where}: allow rule matched nothing (stale): {rule.reason}")


def summary_line(run: ValidationRun) -> str:
    """How many images were validated, skipped (not found) and failed, and what that means
    for the exit status."""
    line = (f"{len(run.outcomes)} image(s): {run.validated} validated, {run.skipped} "
            f"skipped (not found), {run.failed} failed")
    if run.validated + run.failed == 0:
        return line + ": nothing was checked"
    if run.skipped and not run.allow_missing:
        return line + ": an image not found fails the run (--allow-missing skips it)"
    return line


def validation(run: ValidationRun, as_json: bool) -> None:
    """Verdicts of `validate`: JSON, a rich table on a terminal, or plain lines; then the
    counts (JSON: `summary`; else one line on stderr)."""
    outcomes = run.outcomes
    if as_json:
        emit_json({
            "summary": {"validated": run.validated, "skipped": run.skipped,
                        "failed": run.failed, "allow_missing": run.allow_missing,
                        "exit_code": run.exit_code},
            "images": [_verdict_record(o, v) for o in outcomes for v in o.verdicts],
            "unreadable": [{"ref": o.target.ref, "name": o.target.name, "error": o.error}
                           for o in outcomes if o.error],
            "skipped": [{"ref": o.target.ref, "name": o.target.name}
                        for o in outcomes if o.skipped],
        })
        return
    if on_github_actions(os.environ):
        for outcome in outcomes:
            _annotate(outcome, run.allow_missing)
    rows = []
    for outcome in outcomes:
        if outcome.error:
            error(f"{quoted(outcome.target.ref)}: {outcome.error}")
        if outcome.skipped:
            where = "not found" if outcome.target.ref.startswith("docker://") else \
                "not in local storage"
            warning(f"{outcome.target.name or quoted(outcome.target.ref)} "
                    f"({quoted(outcome.target.ref)}): "
                    f"{where}, skipped")
        for verdict in outcome.verdicts:
            rows.append((verdict.ref, verdict.platform, str(verdict.expected or "-"),
                         _found(verdict), str(len(verdict.findings)), verdict.verdict))
    if interactive():
        table(("IMAGE", "PLATFORM", "EXPECTED", "FOUND", "EVIDENCE", "VERDICT"), rows,
              title="aipcc-build validate", keep=("IMAGE", "PLATFORM"),
              drop=("EVIDENCE", "EXPECTED"), wide_option=None)  # validate has no --wide
    else:
        for ref, platform, expected, found, evidence, result in rows:
            sys.stdout.write(f"{ref} {platform}: {result} (expected {expected}; found {found}; "
                             f"{evidence} evidence)\n")
    for outcome in outcomes:
        for verdict in outcome.verdicts:
            where = f"{verdict.ref} {verdict.platform}"
            if verdict.error:
                _detail(where, f"unreadable: {verdict.error}")
            gpu = gpu_code_line(verdict)
            if gpu:
                _detail(where, gpu)
            for finding in (f for f in verdict.findings if f.status != "ok"):
                _detail(where, finding.line())
            for rule in verdict.stale_rules:
                place = f" ({rule.where})" if rule.where else ""
                _detail(where, f"stale allow rule{place}: {rule.reason}")
    sys.stderr.write(summary_line(run) + "\n")


def _detail(where: str, text: str) -> None:
    """One line under an image: whole in a log (one grep finds it), wrapped under the
    image's name on a terminal too narrow for it, never breaking a word or reference."""
    line = f"  {where}: {text}"
    width = terminal_width()
    if not interactive() or len(line) <= width:
        sys.stdout.write(line + "\n")
        return
    import textwrap

    sys.stdout.write(f"  {where}:\n" + textwrap.fill(
        text, width, initial_indent="    ", subsequent_indent="    ",
        break_long_words=False, break_on_hyphens=False) + "\n")


def requirements(verdict: RequirementsVerdict, as_json: bool) -> None:
    """The verdict of `validate --requirements`: JSON, or one line and the findings that
    are not ok (each naming the requirement that brings the distribution)."""
    expected = verdict.expected
    if as_json:
        emit_json({
            "requirements": verdict.source,
            "expected": {"accelerator": expected.accelerator, "version": expected.version},
            "verdict": "ok" if verdict.ok else "failed",
            "distributions": len(verdict.distributions),
            "findings": [_finding_record(f) for f in verdict.findings],
        })
        return
    result = "ok" if verdict.ok else "failed"
    sys.stdout.write(f"{verdict.source}: {result} (expected {expected}; "
                     f"{len(verdict.distributions)} distributions, "
                     f"{len(verdict.findings)} of a toolkit)\n")
    for finding in verdict.findings:
        if finding.status != "ok":
            sys.stdout.write(f"  {finding.status}: {finding.component} "
                             f"{finding.component_version}: {finding.reason}\n")
