"""The one table of transient errors and the one backoff: what is retried, how long each
wait is, and that a registry's Retry-After is honoured."""

from __future__ import annotations

import pytest

from aipcc_build.errors import ToolError
from aipcc_build.tools.retry import (
    Retry,
    transient,
    with_retries,
)


def test_transient_errors_are_connection_errors_and_5xx() -> None:
    def error(text: str) -> ToolError:
        return ToolError(["skopeo"], 1, text)
    assert transient(error("received unexpected HTTP status: 503 Service Unavailable"))
    assert transient(error("invalid status code from registry 502 (Bad Gateway)"))
    assert transient(error("dial tcp 127.0.0.1:5000: connect: connection refused"))
    assert not transient(error("unauthorized: authentication required"))
    assert not transient(error("manifest unknown"))


def test_retries_are_bounded_with_capped_backoff() -> None:
    waits: list[float] = []
    calls = []

    def flaky() -> None:
        calls.append(1)
        raise ToolError(["skopeo"], 1, "status 503")
    with pytest.raises(ToolError):
        with_retries(flaky, Retry(attempts=6, first=1, cap=4), lambda *a: None, waits.append)
    assert len(calls) == 6 and waits == [1, 2, 4, 4, 4]
    with pytest.raises(ToolError):  # not transient: no retry
        with_retries(lambda: (_ for _ in ()).throw(ToolError(["x"], 1, "denied")),
                     Retry(), lambda *a: None, waits.append)
    assert len(waits) == 5
