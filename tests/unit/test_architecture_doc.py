"""docs/architecture.md describes the tree as it is: every module and package it names in
its tables exists, and every module of the product is named in the row of its package."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "aipcc_build"
DOC = REPO / "docs" / "architecture.md"

# A table row: | what | `package/` or `module.py`, ... | what it owns |
_ROW = re.compile(r"^\| [^|]+ \| (?P<where>[^|]+) \| (?P<owns>.+) \|$")
_CODE = re.compile(r"`([^`]+)`")
# A module named in the owns cell: `name` (or `sub/name`) followed by its description in
# parentheses.
_MODULE = re.compile(r"`([a-z_]+(?:/[a-z_]+)*)` \(")


def rows() -> list[tuple[list[str], str]]:
    found = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match and "`" in match["where"]:
            found.append((_CODE.findall(match["where"]), match["owns"]))
    return found


def exists(name: str) -> bool:
    path = PACKAGE / name.rstrip("/")
    return path.is_dir() or path.with_suffix(".py").is_file() or path.is_file()


def test_every_module_the_tables_name_exists() -> None:
    missing = []
    for places, owns in rows():
        missing += [place for place in places if not exists(place)]
        packages = [place.rstrip("/") for place in places if place.endswith("/")]
        for package in packages:
            for module in _MODULE.findall(owns):
                if not exists(f"{package}/{module}") and not exists(module):
                    missing.append(f"{package}/{module}")
    assert not missing, f"docs/architecture.md names what the tree lacks: {missing}"


def test_every_module_of_a_package_is_in_its_row() -> None:
    described = {place.rstrip("/"): owns for places, owns in rows() for place in places
                 if place.endswith("/")}
    assert described, "no package rows found"
    unnamed = []
    for package, owns in described.items():
        named = set(_CODE.findall(owns))
        for path in sorted((PACKAGE / package).glob("*.py")):
            if path.stem == "__init__":
                continue
            if not {path.stem, f"{package}/{path.stem}"} & named:
                unnamed.append(f"{package}/{path.stem}")
        for sub in sorted(p for p in (PACKAGE / package).iterdir()
                          if p.is_dir() and (p / "__init__.py").exists()):
            if not {f"{sub.name}/", sub.name} & named:
                unnamed.append(f"{package}/{sub.name}/")
            unnamed += [f"{package}/{sub.name}/{path.stem}" for path in sorted(sub.glob("*.py"))
                        if path.stem != "__init__" and f"{sub.name}/{path.stem}" not in named]
    assert not unnamed, f"modules docs/architecture.md does not describe: {unnamed}"
