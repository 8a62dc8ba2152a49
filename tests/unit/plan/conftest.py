"""This folder's tests work on a copy of the shipped project (the `shipped` fixture), as a
git repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.project import git_repository, shipped_project


@pytest.fixture(scope="session")
def shipped_objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The object store of the shipped project committed once, which every `repo` borrows
    from (git_repository): nothing writes to it, as git writes a repository's new objects
    to its own store."""
    return git_repository(shipped_project(tmp_path_factory.mktemp("shipped"))) / ".git/objects"


@pytest.fixture
def repo(shipped: Path, shipped_objects: Path) -> Path:
    return git_repository(shipped, borrowed=shipped_objects)
