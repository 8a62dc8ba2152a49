"""This folder's tests work on a copy of the shipped project, as a git repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.project import git_repository, shipped_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return shipped_project(tmp_path)


@pytest.fixture
def repo(project: Path) -> Path:
    return git_repository(project)
