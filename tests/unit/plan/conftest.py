"""This folder's tests work on a copy of the shipped project (the `shipped` fixture), as a
git repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.project import git_repository


@pytest.fixture
def repo(shipped: Path) -> Path:
    return git_repository(shipped)
