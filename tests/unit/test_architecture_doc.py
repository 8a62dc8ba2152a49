"""docs/architecture.md describes the tree as it is: every module and package it names in
its tables exists, every module of the product is named in the row of its package, and the
stage chain it draws is the import graph: no package imports one at or after its own step,
and each arrow stands for an import."""

from __future__ import annotations

import ast
import functools
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


# The stage chain: "matrix -> render -> ... -> report -> cli", steps of comma-separated names.
_CHAIN = re.compile(r"^([a-z_]+(?: -> [a-z_]+(?:, [a-z_]+)*)+)$", re.M)


def chain() -> list[list[str]]:
    [drawn] = _CHAIN.findall(DOC.read_text(encoding="utf-8"))
    return [step.split(", ") for step in drawn.split(" -> ")]


@functools.cache
def imported_packages(package: str) -> frozenset[str]:
    """The top-level packages of aipcc_build that PACKAGE's modules import, at any depth
    (imports inside functions count: they run too). Each package's modules are parsed once
    a run: the tests ask about every package more than once."""
    found = set()
    for path in (PACKAGE / package).rglob("*.py"):
        depth = len(path.relative_to(PACKAGE).parts) - 1
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level > depth:
                found.update([node.module.split(".")[0]] if node.module else
                             [alias.name for alias in node.names])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "aipcc_build."):
                found.add((node.module or "").split(".")[1])
            elif isinstance(node, ast.Import):
                found.update(alias.name.split(".")[1] for alias in node.names
                             if alias.name.startswith("aipcc_build."))
    return frozenset(found - {package})


def test_the_imports_follow_the_arrows_drawn() -> None:
    steps = chain()
    drawn = [name for step in steps for name in step]
    assert all((PACKAGE / name / "__init__.py").exists() for name in drawn), drawn
    wrong, unused = [], []
    for number, step in enumerate(steps):
        before = {name for earlier in steps[:number] for name in earlier}
        for package in step:
            later = imported_packages(package) & set(drawn) - before
            wrong += [f"{package} imports {name}" for name in sorted(later)]
        if number and not any(imported_packages(package) & set(steps[number - 1])
                              for package in step):
            unused.append(f"{', '.join(steps[number - 1])} -> {', '.join(step)}")
    assert not wrong, f"imports against the arrows docs/architecture.md draws: {wrong}"
    assert not unused, f"arrows no import stands for: {unused}"


def test_the_libraries_import_no_stage() -> None:
    stages = {name for step in chain() for name in step}
    wrong = {library: sorted(imported_packages(library) & stages)
             for library in ("imagefs", "toolkit", "tools")}
    assert not any(wrong.values()), wrong
