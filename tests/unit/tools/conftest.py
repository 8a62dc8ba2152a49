"""Fixtures of the tools' tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.socket_server import SocketServer


@pytest.fixture
def servers() -> Iterator[list[SocketServer]]:
    """The socket servers a test appends here, stopped after it."""
    made: list[SocketServer] = []
    yield made
    for server in made:
        server.stop()
