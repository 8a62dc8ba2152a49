"""Real artifacts the tests use, importable by name (several test directories have a
conftest module, so the top-level one cannot be imported as `conftest`)."""

from __future__ import annotations

from pathlib import Path


def wheel(wheelhouse: Path, project: str, version: str) -> Path:
    """The wheel file of PROJECT==VERSION in the wheelhouse."""
    found = sorted(wheelhouse.glob(f"{project.replace('-', '_')}-{version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"{project}=={version} is not in {wheelhouse}")
    return found[0]
