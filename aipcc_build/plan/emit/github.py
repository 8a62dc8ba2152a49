"""GitHub Actions: the plan as `strategy.matrix` JSON, one matrix per wave."""

from __future__ import annotations

import json
import shlex
from typing import Any

from ...errors import InputError
from ...matrix import Matrix
from ..dag import BuildPlan, PlannedBuild
from . import JobCommand

# GitHub Actions: "A job matrix can generate a maximum of 256 jobs per workflow run", and
# "Outputs can be a maximum of 1 MB per job ... approximated based on UTF-16 encoding"
# (docs.github.com, Actions limits and "Passing information between jobs").
GITHUB_MATRIX_LIMIT = 256
GITHUB_OUTPUT_LIMIT = 1_000_000  # bytes of UTF-16; 1 MB read as the smaller 10**6


def github(matrix: Matrix, plan: BuildPlan, command: JobCommand) -> str:
    """One-line JSON: a `strategy.matrix` per wave ("wave1", "wave2", ...), the registry
    host the jobs log in to, whether its TLS certificate is verified, and whether the jobs
    push (images built FROM a parent need it pushed: without, the workflow skips them).

    A wave with no image gets no key, so a workflow never hands GitHub an empty matrix: it
    skips that wave's job with `if: fromJSON(needs.plan.outputs.plan).waveN`. Each entry
    carries the job's commands (`fetch`, `command`) and, for an image whose parent is in
    the plan, the parent's reference: the job checks it was pushed, so a failed image skips
    only its own dependents.
    """
    registry = command.registry or matrix.registry
    document: dict[str, Any] = {"images": len(plan.builds), "waves": len(plan.waves),
                                "registry_host": registry.split("/", 1)[0],
                                "tls_verify": command.tls_verify, "push": command.push}
    references = {build.image.key: build.image.reference for build in plan.builds}
    for number, wave in enumerate(plan.waves, start=1):
        if len(wave) > GITHUB_MATRIX_LIMIT:
            counts: dict[str, int] = {}
            for build in wave:
                counts[build.image.accelerator] = counts.get(build.image.accelerator, 0) + 1
            split = ", ".join(f"{name}: {count}" for name, count in counts.items())
            raise InputError(
                f"wave {number} has {len(wave)} images, over GitHub's limit of "
                f"{GITHUB_MATRIX_LIMIT} jobs per matrix ({split}): run one plan job per "
                f"accelerator (docs/ci/README.md)", field="filters.accelerators")
        document[f"wave{number}"] = {
            "include": [_github_entry(b, command, references) for b in wave]}
    text = json.dumps(document, separators=(",", ":"))
    size = len(text.encode("utf-16-le"))
    if size > GITHUB_OUTPUT_LIMIT:
        raise InputError(f"the GitHub matrix takes {size} bytes (UTF-16), over the "
                         f"{GITHUB_OUTPUT_LIMIT} a job output holds: split the plan by "
                         f"accelerator (docs/ci/README.md)", field="filters.accelerators")
    return text


def _github_entry(build: PlannedBuild, command: JobCommand,
                  references: dict[str, str]) -> dict[str, Any]:
    image = build.image
    return {
        "key": image.key,
        "name": image.name,
        "kind": image.kind,
        "accelerator": image.accelerator,
        "version": image.version,
        "os": image.os,
        "reference": image.reference,
        "parent": references[build.needs[0]] if build.needs else "",
        "fetch": command.fetch or "",
        "command": shlex.join(command.argv(image.key)),
    }
