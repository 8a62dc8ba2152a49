"""How `aipcc-build index` looks: refusals and a summary per variant on stderr; on stdout
one line per variant (and, on a dry run, per added or removed wheel), or JSON. A run that
failed midway still says, per variant, whether it was switched and what it serves."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Optional

from .console import emit_json, shown_path

if TYPE_CHECKING:
    from ..wheel_indexes.variants import IndexResult, VariantResult


def _generation(number: Optional[int], pulp: bool = False) -> str:
    """A static index's generation (g000007), a Pulp repository version (version 7)."""
    if number is None:
        return "-" if not pulp else "new version"
    return f"version {number}" if pulp else f"g{number:06d}"


def _state(result: VariantResult, dry_run: bool) -> str:
    if result.error is not None:
        return "failed" if result.switched else "not-switched"
    if not result.changed:
        return "unchanged"
    return "would-publish" if dry_run else "published"


def published(result: IndexResult, as_json: bool) -> None:
    if result.rolled_back:
        _rolled_back(result, as_json)
        return
    if as_json:
        emit_json({
            "root": result.root, "dry_run": result.dry_run, "ok": not result.failed,
            "variants": [{**asdict(v), "state": _state(v, result.dry_run),
                          "added": list(v.added), "removed": list(v.removed),
                          "pruned": list(v.pruned)} for v in result.variants],
            "refusals": [asdict(r) for r in result.refusals],
        })
    for refusal in result.refusals:
        sys.stderr.write(f"refused: {refusal.variant}: {shown_path(refusal.wheel)}: "
                         f"{refusal.reason}\n")
    if result.refusals:
        sys.stderr.write(f"index: {len(result.refusals)} wheel(s) refused: nothing was "
                         "published\n")
        return
    pulp = result.root.startswith("pulp+")
    for variant in result.variants:
        if variant.error is not None:
            if not as_json:
                sys.stdout.write(f"{variant.variant}\t{_state(variant, False)}\t"
                                 f"{_generation(variant.served, pulp)}\t{variant.url}\n")
            switched = "switched to" if variant.switched else "not switched to"
            sys.stderr.write(f"index: {variant.variant}: {switched} "
                             f"{_generation(variant.generation, pulp)}: {variant.error}\n")
            continue
        if not as_json:
            sys.stdout.write(f"{variant.variant}\t{_state(variant, result.dry_run)}\t"
                             f"{_generation(variant.generation, pulp)}\t{variant.url}\n")
            if result.dry_run:
                for name in variant.added:
                    sys.stdout.write(f"+\t{variant.variant}\t{name}\n")
                for name in variant.removed:
                    sys.stdout.write(f"-\t{variant.variant}\t{name}\n")
        pruned = f", pruned {len(variant.pruned)} older" if variant.pruned else ""
        # What the index serves, read again after the switches (a dry run: would serve).
        current = variant.served if variant.served is not None and not result.dry_run \
            else variant.generation
        reused = "" if pulp else f", {variant.reused} unchanged (not read again)"
        sys.stderr.write(
            f"index: {variant.variant}: {variant.wheels} wheel(s), {len(variant.added)} "
            f"added, {len(variant.removed)} removed{reused}; "
            f"{_generation(current, pulp)} "
            f"{'would be' if result.dry_run and variant.changed else 'is'} current at "
            f"{variant.path if pulp else shown_path(variant.path)}{pruned}\n")


def _rolled_back(index: IndexResult, as_json: bool) -> None:
    if as_json:
        emit_json({"rolled_back": [asdict(r) for r in index.rolled_back]})
    for result in index.rolled_back:
        if not as_json:
            sys.stdout.write(f"{result.variant}\trolled-back\tversion {result.version}\t"
                             f"{result.url}\n")
        sys.stderr.write(f"index: {result.variant}: serves version {result.version} again "
                         f"(was version {result.previous})\n")
