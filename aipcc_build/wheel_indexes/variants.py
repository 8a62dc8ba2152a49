"""What every destination of `aipcc-build index` shares: each variant's index as the matrix
lays it out (its URL, its directory, the toolkit its wheels must fit), the judging of its
wheels, and the results a destination reports.

A wheel is refused when its evidence (read by `wheel_file`, judged as the validator judges
an image of the variant) says another toolkit, when it says +cpu in a GPU index, when two
different files share its name, or when an installer could not tell it from another wheel.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..errors import InputError, without_credentials
from ..matrix import Matrix, expand, index_layout
from ..suggest import did_you_mean
from ..validate.results import FAILING, Expectation
from ..validate.verdict import FAMILIES, judge_evidence, place
from . import DEFAULT_KEEP
from .wheel_file import WheelError, WheelFacts, identity, read

__all__ = ["DEFAULT_KEEP", "IndexResult", "IndexTarget", "Judged", "Refusal", "RollbackResult",
           "VariantResult", "judge_wheels", "refusal", "targets"]


@dataclass(frozen=True)
class IndexTarget:
    """One variant's index: where it goes and what its wheels must fit."""

    variant: str  # "cuda12.8-ubi9"
    url: str
    expected: Expectation  # accelerator and toolkit release, as for an image of the variant
    directory: str  # the variant's directory below ROOT: "3.0/cuda12.8-ubi9"
    pages: str  # the pages' directory inside it: "simple"
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Refusal:
    variant: str
    wheel: str  # the file's path
    reason: str


@dataclass(frozen=True)
class VariantResult:
    variant: str
    url: str
    path: str  # ROOT/<directory>
    generation: Optional[int]  # current after this run (would be, on a dry run)
    previous: Optional[int]
    wheels: int
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    reused: int = 0  # wheels whose facts came from the manifest, unread
    pruned: tuple[int, ...] = ()
    # What the destination serves, read again after the switches (None: nothing yet, or
    # not read: a dry run, a run that stopped before).
    served: Optional[int] = None
    switched: bool = False  # this run pointed the variant's index at `generation`
    error: Optional[str] = None  # why this variant is not what the run set out to serve

    @property
    def changed(self) -> bool:
        return self.generation != self.previous


@dataclass(frozen=True)
class RollbackResult:
    variant: str
    url: str
    version: int  # served now
    previous: int  # served before


@dataclass(frozen=True)
class IndexResult:
    root: str
    dry_run: bool
    variants: tuple[VariantResult, ...] = ()
    refusals: tuple[Refusal, ...] = ()
    rolled_back: tuple[RollbackResult, ...] = ()

    @property
    def failed(self) -> bool:
        """A wheel refused, or a variant that does not serve what the run published."""
        return bool(self.refusals) or any(v.error for v in self.variants)


def targets(matrix: Matrix, wheels: Mapping[str, Sequence[str]]) -> list[IndexTarget]:
    """The indexes to publish: each variant named must be one of the matrix's."""
    by_variant = {image.versioned_variant: image for image in expand(matrix)
                  if image.wheel_index is not None}
    if not by_variant:
        raise matrix.error("wheel_index", "the matrix has no wheel_index: there is no index "
                           "URL to lay the indexes out by")
    found: list[IndexTarget] = []
    seen: dict[str, str] = {}
    for variant, directories in wheels.items():
        image = by_variant.get(variant)
        if image is None:
            extra = did_you_mean(variant, sorted(by_variant), listing="the matrix has")
            raise InputError(f"'{variant}' is not a variant of the matrix{extra}",
                             field="wheels")
        assert image.wheel_index is not None
        if image.wheel_index in seen:
            raise InputError(f"'{variant}' and '{seen[image.wheel_index]}' are one index "
                             f"({image.wheel_index}): give its wheels once", field="wheels")
        seen[image.wheel_index] = variant
        for directory in directories:
            if not Path(directory).is_dir():
                raise InputError(f"{without_credentials(directory)}: not a directory of "
                                 "wheels", field="wheels")
        pattern = matrix.accelerators[image.accelerator].wheel_index or matrix.wheel_index
        assert pattern is not None
        directory, pages = index_layout(pattern, image.wheel_index)
        found.append(IndexTarget(
            variant=variant, url=image.wheel_index,
            expected=Expectation(image.accelerator, image.version, source="matrix"),
            directory=directory, pages=pages, sources=tuple(directories)))
    return found


@dataclass
class Judged:
    """One variant's wheels read and judged: what any destination (a tree, a Pulp) takes."""

    target: IndexTarget
    wheels: dict[str, tuple[Path, WheelFacts]] = field(default_factory=dict)  # by file name
    metadata: dict[str, bytes] = field(default_factory=dict)  # of wheels read this run
    reused: int = 0  # wheels whose facts were KNOWN, not read again
    refusals: list[Refusal] = field(default_factory=list)


def judge_wheels(target: IndexTarget, known: Optional[Mapping[str, WheelFacts]] = None) -> Judged:
    """Every wheel of TARGET read and judged. A wheel whose facts KNOWN records (by file
    name; the same size and modification time) is not read again."""
    judged = Judged(target)
    seen: dict[str, Path] = {}
    installs_as: dict[tuple[str, str, str], str] = {}  # what pip tells apart -> file name
    for directory in target.sources:
        for path in (Path(directory, name) for name in sorted(os.listdir(directory))
                     if name.endswith(".whl")):
            try:
                facts = _facts(judged, known or {}, path)
            except WheelError as exc:
                judged.refusals.append(Refusal(target.variant, str(path), str(exc)))
                continue
            if facts.filename in judged.wheels:
                if judged.wheels[facts.filename][1].sha256 != facts.sha256:
                    judged.refusals.append(Refusal(
                        target.variant, str(path), "a different wheel of the same name is "
                        f"in {seen[facts.filename].parent}"))
                continue
            seen[facts.filename] = path
            alike = installs_as.setdefault(identity(facts.filename), facts.filename)
            if alike != facts.filename:
                judged.refusals.append(Refusal(
                    target.variant, str(path), "the same project, version and tags as "
                    f"{alike}: an installer sees one wheel"))
                continue
            reason = refusal(facts, target.expected)
            if reason is not None:
                judged.refusals.append(Refusal(target.variant, str(path), reason))
                continue
            judged.wheels[facts.filename] = (path, facts)
    return judged


def _facts(judged: Judged, known: Mapping[str, WheelFacts], path: Path) -> WheelFacts:
    recorded = known.get(path.name)
    if recorded is not None:
        with contextlib.suppress(OSError):
            found = path.stat()
            if stat.S_ISREG(found.st_mode) and \
                    (found.st_size, found.st_mtime_ns) == (recorded.size, recorded.mtime_ns):
                judged.reused += 1
                return recorded
    facts, metadata = read(path)
    judged.metadata[facts.filename] = metadata
    return facts


def refusal(facts: WheelFacts, expected: Expectation) -> Optional[str]:
    """Why a wheel must not go into the index of EXPECTED's variant, or None. Its evidence
    is judged as the validator judges an image of that variant."""
    if facts.version.partition("+")[2] == "cpu" and expected.accelerator in FAMILIES:
        return f"its local version +cpu says it is built for CPU, not for {expected}"
    for evidence in facts.evidence:
        status, reason = judge_evidence(evidence, place(evidence), expected)
        if status in FAILING:
            what = " ".join(x for x in (evidence.component, evidence.version) if x)
            return f"{what} ({evidence.kind} {evidence.path}): {reason}"
    return None




def switched_before_the_stop(switched: Sequence[str], not_switched: Sequence[str]) -> str:
    """What a signal left: the variants that serve this run's index, and those that still
    serve what they served before."""
    return (f"index switched {', '.join(switched) or 'no variant'}"
            + (f"; not switched: {', '.join(not_switched)}" if not_switched else ""))
