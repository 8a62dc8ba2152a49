"""The one table of transient errors and the one backoff: what is retried, how long each
wait is, and that a registry's Retry-After is honoured."""

from __future__ import annotations

import pytest

from aipcc_build.errors import ToolError
from aipcc_build.tools.retry import (
    MAX_RETRY_AFTER,
    NOT_ACTED_STATUS,
    Retry,
    StillFailing,
    TransientAnswer,
    parse_retry_after,
    retry_after,
    transient,
    transient_status,
    with_retries,
)


def error(text: str) -> ToolError:
    return ToolError(["skopeo"], 1, text)


def test_transient_errors_are_connection_errors_and_5xx() -> None:
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


def test_one_table_for_buildah_skopeo_and_http() -> None:
    # skopeo and buildah on a 429: containers/image words it either way.
    assert transient(error("reading manifest 1 in h/r: toomanyrequests: slow down"))
    assert transient(error("received unexpected HTTP status: 429 Too Many Requests"))
    # buildah's pulls.
    assert transient(error("dial tcp: lookup quay.io: Temporary failure in name resolution"))
    assert transient(error("pinging container registry h: Get ...: net/http: TLS handshake "
                           "timeout"))
    assert transient(ToolError(["x"], -9, "", timed_out=True))
    # crun 1.8's start of a RUN step on a loaded machine (seen in this suite's CI).
    assert transient(error("Close_Fd sealing memfd copy: Device or resource busy\n"
                           "subprocess exited with status 1\nError: exit status 1"))
    assert transient(TransientAnswer("http://h/v2/r/manifests/t", 503, "Service Unavailable"))
    # A digest that happens to hold 429 or 503 is no status.
    assert not transient(error("manifest unknown: sha256:4290503aa"))


def test_transient_http_answers_and_those_that_allow_a_post_again() -> None:
    assert [s for s in (200, 401, 403, 404, 429, 500, 502, 503, 504, 599, 600)
            if transient_status(s)] == [429, 500, 502, 503, 504, 599]
    # A server that answered these did not act: a POST may go again; after a 502 it may have.
    assert {429, 503} == NOT_ACTED_STATUS
    assert all(transient_status(s) for s in NOT_ACTED_STATUS)


def test_retry_after_is_honoured_up_to_a_bound() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert 0 <= parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT") == 0.0  # type: ignore[operator]
    answer = TransientAnswer("http://h/v2/r/manifests/t", 429, "Too Many Requests", 7.0)
    assert retry_after(answer.stderr) == 7.0
    retry = Retry(attempts=3, first=1, cap=4)
    assert retry.delay(1) == 1 and retry.delay(1, 7.0) == 7.0 and retry.delay(3, 0.5) == 4
    assert retry.delay(1, 10 * MAX_RETRY_AFTER) == MAX_RETRY_AFTER

    waits: list[float] = []
    answers = [answer, answer]

    def flaky() -> str:
        if answers:
            raise answers.pop()
        return "ok"
    assert with_retries(flaky, retry, lambda *a: None, waits.append) == "ok"
    assert waits == [7.0, 7.0]


def test_a_transient_failure_that_outlasts_the_attempts_exits_1() -> None:
    def down() -> None:
        raise ToolError(["skopeo", "copy"], 1, "received unexpected HTTP status: 502 Bad "
                                              "Gateway")
    with pytest.raises(StillFailing) as caught:
        with_retries(down, Retry(attempts=2, first=0, cap=0), lambda *a: None, lambda s: None)
    assert caught.value.exit_code == 1 and "502 Bad Gateway" in str(caught.value)
    with pytest.raises(ToolError) as refused:  # a refusal stays what it was (exit 2)
        with_retries(lambda: (_ for _ in ()).throw(ToolError(["x"], 1, "denied")), Retry(),
                     lambda *a: None, lambda s: None)
    assert refused.value.exit_code == 2
