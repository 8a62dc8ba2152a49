"""The HTTP/1.1 client against answers found to break it: digits `int` refuses ("²", a
byte of the answer read as latin-1), framing two headers dispute, transfer codings it
cannot read, an upgrade nobody asked for, endless interim answers or trailers, and a
server that trickles its answer a byte at a time (each read within the timeout, the
whole never done). Each a bounded read and an OSError (no ValueError, no hang)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.tools import http1
from aipcc_build.tools.retry import parse_retry_after
from tests.support.same_answer import SameAnswer
from tests.support.socket_server import SocketServer
from tests.unit.tools.test_http1 import Scripted, connect, gives_up_in_time, serve

__all__ = ["serve"]  # the fixture, used by name


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\nab",
    b"HTTP/1.1 \xb9\xb2\xb3 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: notchunked\r\n\r\nabc",
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n" * 101 + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"T: x\r\n" * 101
    + b"\r\n",
    # A chunk extension past the bound (a 10 MB chunk-size line: below).
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;" + b"e" * 70000 + b"\r\n",
    # A Content-Length past any body sent: the answer ends first.
    b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nab",
])
def test_a_hostile_answer_is_a_bad_answer(serve: list[Scripted], answer: bytes) -> None:
    _, conn = connect(serve, answer, close=True)
    with pytest.raises(http1.BadAnswer):
        conn.request("GET", "/", b"", {}, 1000)
    conn.close()


def test_a_chunk_size_line_of_10_mb_without_a_line_break_is_a_bad_answer() -> None:
    server = SameAnswer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + b"1" * 10_000_000)
    try:
        conn = http1.Connection(server.host, 5.0)
        with pytest.raises(http1.BadAnswer, match="too long"):
            conn.request("GET", "/", b"", {}, 1000)
        conn.close()
    finally:
        server.stop()


def test_a_port_of_other_digits_is_refused_before_connecting() -> None:
    with pytest.raises(http1.BadAnswer):
        http1.split_host("registry.example:\u00b2", 443)


def test_chunks_and_a_content_length_both_read_the_chunks_and_end_the_connection(
        serve: list[Scripted]) -> None:
    _, conn = connect(serve, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
    reply = conn.request("GET", "/", b"", {}, 100)
    assert (reply.body, reply.will_close) == (b"abc", True)
    conn.close()


def test_interim_answers_and_trailers_within_bounds_are_read(serve: list[Scripted]) -> None:
    _, conn = connect(serve, b"HTTP/1.1 100 Continue\r\n\r\n" * 3
                      + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"2\r\nok\r\n0\r\n" + b"T: x\r\n" * 5 + b"\r\n")
    reply = conn.request("GET", "/", b"", {}, 100)
    assert (reply.status, reply.body, reply.will_close) == (200, b"ok", False)
    conn.close()


class Trickle(SocketServer):
    """A server that answers a byte every TICK seconds, for ever (until stopped)."""

    def __init__(self, head: bytes, tick: float) -> None:
        self.head, self.tick = head, tick
        self.stopped = threading.Event()
        super().__init__()

    def talk(self, conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(self.head)
        while not self.stopped.wait(self.tick):
            conn.sendall(b"x")  # an OSError when the client gave up

    def stop(self) -> None:
        self.stopped.set()
        super().stop()


@pytest.fixture(params=[b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n",
                        b"HTTP/1.1 200 OK\r\nX-Slow: "], ids=["body", "header"])
def trickle(request: pytest.FixtureRequest) -> Iterator[Trickle]:
    server = Trickle(request.param, 0.025)
    yield server
    server.stop()


def test_an_answer_trickled_a_byte_at_a_time_times_out(trickle: Trickle) -> None:
    """Each byte comes well within the timeout (0.025 s of 0.25 s): only a bound on the whole
    answer ends the wait (it took as long as the server kept sending)."""
    gives_up_in_time(trickle.host, 0.25, TimeoutError, 1000000)


def test_a_server_stalling_mid_body_times_out() -> None:
    server = Trickle(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf", 60.0)
    try:
        gives_up_in_time(server.host, 0.25, TimeoutError, 1000)
    finally:
        server.stop()


def test_a_quick_answer_after_a_slow_one_on_the_same_connection(
        serve: list[Scripted]) -> None:
    """The pace is counted from each request: a connection kept idle longer than its
    timeout still carries the next request."""
    _, conn = connect(serve, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na",
                      b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb", timeout=0.3)
    assert conn.request("GET", "/", b"", {}, 10).body == b"a"
    time.sleep(0.5)
    assert conn.request("PUT", "/", b"x" * 100000, {}, 10).body == b"b"
    conn.close()


@pytest.mark.parametrize("header", ["\u00b2", "\u00b9\u00b2", "-1", "1.5", "soon"])
def test_a_retry_after_that_is_no_number_of_seconds_is_none(header: str) -> None:
    assert parse_retry_after(header) is None


@pytest.mark.parametrize("host", ["registry.example\nInjected: 1", "registry example:5000",
                                  "", ":5000"])
def test_a_host_no_host_line_can_carry_is_no_host(host: str) -> None:
    """A line break in the host (a reference's, a --to's) raised ValueError from the
    request writer: a traceback in the build's registry check."""
    with pytest.raises(http1.BadAnswer, match="not a (host|port)"):
        http1.Connection(host, 1.0).request("GET", "/v2/", b"", {}, 10)


def test_tls_answers_large_and_kept_alive_read_through_the_paced_reader(
        tmp_path: Path) -> None:
    """The reads go through the pace's own raw reader, over TLS too: a 3 MiB body and a
    second request on the same connection."""
    import http.server
    import ssl

    from tests.support.certs import certificates
    from tests.support.http_server import serving

    certificates(tmp_path / "certs")
    body = bytes(range(256)) * (3 * 4096)
    connections: list[int] = []

    class Big(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            connections.append(1)
            super().setup()

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(tmp_path / "certs" / "server.pem",
                                tmp_path / "certs" / "server-key.pem")
    client_side = ssl.create_default_context(cafile=str(tmp_path / "certs" / "ca.pem"))
    with serving(Big, server_side) as origin:
        conn = http1.Connection(origin.split("://", 1)[1], 5.0, client_side)
        for _ in range(2):
            reply = conn.request("GET", "/", b"", {}, len(body))
            assert (reply.status, reply.body == body, reply.will_close) == (200, True, False)
        conn.close()
    assert len(connections) == 1
