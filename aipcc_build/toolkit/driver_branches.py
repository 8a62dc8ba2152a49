"""The data-center driver branches NVIDIA's forward-compatibility package supports, per
CUDA release, and their end of life: `data/driver-branches.yaml` (it names its sources),
the one reader of that file.

The branches decide two things: the `brand=...,driver>=N,driver<N+1` clauses of
`NVIDIA_REQUIRE_CUDA` the renderer writes into CUDA images (`require_cuda`), and whether
`select` runs an image on a node through the forward-compatibility package (`supports`).
A release the table does not list gets no clauses and no forward compatibility: the table
is NVIDIA's, never inferred.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "driver-branches.yaml"
_RELEASE = re.compile(r"^\d+\.\d+$")
_MONTH = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")


@dataclass(frozen=True)
class Branch:
    number: int  # 535
    eol: Optional[str] = None  # "2026-06": the month NVIDIA ends it; None: not dated
    long_term: bool = False


@dataclass(frozen=True)
class DriverBranches:
    brands: tuple[str, ...]
    releases: dict[str, tuple[int, ...]]  # "12.9" -> (535, 550, ...)
    branches: dict[int, Branch]
    path: str

    def supported(self, release: str) -> tuple[int, ...]:
        """The branches the forward-compatibility package of RELEASE ("12.9") supports."""
        return self.releases.get(release, ())

    def supports(self, release: str, driver_major: int) -> bool:
        return driver_major in self.supported(release)

    def branch(self, number: int) -> Branch:
        return self.branches.get(number, Branch(number))

    def require_cuda(self, release: str) -> str:
        """NVIDIA_REQUIRE_CUDA for a CUDA RELEASE image, as NVIDIA's own images spell it."""
        clauses = [f"brand={brand},driver>={n},driver<{n + 1}"
                   for n in self.supported(release) for brand in self.brands]
        return " ".join([f"cuda>={release}", *clauses])


def _fail(path: str, field: str, why: str) -> InputError:
    return InputError(why, file=path, field=field)


def parse(data: Any, path: str) -> DriverBranches:
    if not isinstance(data, dict) or data.get("schema") != 1:
        raise _fail(path, "schema", "a driver-branch table of schema 1")
    brands = data.get("brands")
    if not isinstance(brands, list) or not brands or not all(
            isinstance(b, str) and re.fullmatch(r"[a-z]+", b) for b in brands):
        raise _fail(path, "brands", "a list of brand names (tesla, grid, ...)")
    releases: dict[str, tuple[int, ...]] = {}
    for release, numbers in (data.get("releases") or {}).items():
        if not isinstance(release, str) or not _RELEASE.match(release) or not isinstance(
                numbers, list) or not all(isinstance(n, int) and n > 0 for n in numbers):
            raise _fail(path, f"releases.{release}", "a CUDA release (\"12.9\") and a list "
                        "of driver branches (535)")
        releases[release] = tuple(numbers)
    branches: dict[int, Branch] = {}
    for number, facts in (data.get("branches") or {}).items():
        eol = facts.get("eol") if isinstance(facts, dict) else None
        if not isinstance(number, int) or not isinstance(facts, dict) or (
                eol is not None and not (isinstance(eol, str) and _MONTH.match(eol))):
            raise _fail(path, f"branches.{number}", "a branch number and {eol: YYYY-MM, "
                        "long_term: true|false}")
        branches[number] = Branch(number, eol, bool(facts.get("long_term", False)))
    return DriverBranches(tuple(brands), releases, branches, path)


@lru_cache(maxsize=1)
def load_driver_branches(path: Optional[str] = None) -> DriverBranches:
    import yaml

    where = path or str(DATA_FILE)
    try:
        data = yaml.safe_load(Path(where).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the driver-branch table: {exc.strerror}",
                         file=where) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not YAML: {exc}", file=where) from None
    return parse(data, where)
