"""The one place that decides how results look: rich on a terminal, plain lines in CI
(or when not a TTY), JSON for machines. Data goes to stdout, messages to stderr."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional, TextIO

if TYPE_CHECKING:  # keep jinja2 out of commands that only print
    from .model import ImageSpec
    from .plan import BuildPlan
    from .render import RenderResult

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
