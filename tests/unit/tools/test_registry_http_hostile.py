"""registry_http's look-ups (the build's registry check, promote's and mirror's digest of a
tag) against hostile answers and references: a reference holding a line break raised
ValueError from the request writer (a traceback in promote); one with a space went into
the request line as it was. Answers http1 refuses are no answer: skopeo is asked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aipcc_build.tools import registry_http
from tests.support.same_answer import SameAnswer


@pytest.fixture
def answering() -> Iterator[SameAnswer]:
    server = SameAnswer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    yield server
    server.stop()


@pytest.mark.parametrize("tail", ["rel/img:1\nInjected: 1", "rel/img:1 x", "rel/i mg:1",
                                  "rel/img:\u00b9"])
def test_a_reference_no_request_line_can_carry_is_left_to_skopeo(answering: SameAnswer,
                                                                  tail: str) -> None:
    ref = f"docker://{answering.host}/{tail}"
    assert registry_http.manifest_digest(ref, tls_verify=False) is registry_http.UNKNOWN


def test_a_plain_reference_is_looked_at(answering: SameAnswer) -> None:
    found = registry_http.manifest_digest(f"docker://{answering.host}/rel/img:1",
                                          tls_verify=False)
    assert found == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 \xb9\xb2\xb3 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}",
    b"HTTP/1.1 101 Switching Protocols\r\n\r\n"])
def test_an_answer_http1_refuses_is_left_to_skopeo(answer: bytes) -> None:
    server = SameAnswer(answer)
    try:
        assert registry_http.manifest_digest(f"docker://{server.host}/rel/img:1",
                                             tls_verify=False) is registry_http.UNKNOWN
    finally:
        server.stop()
