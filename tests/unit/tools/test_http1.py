"""The registry client's HTTP/1.1 connection against servers that answer as they should
(Content-Length, chunked, to the end of the connection, keep-alive over several requests)
and ones that do not (a line without end, headers without end, a body shorter than said,
a bad chunk, nonsense, silence, a closed connection): each a bounded read and an OSError
the registry client reports as no answer, never a hang."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from aipcc_build.tools import http1
from tests.support.socket_server import SocketServer, read_head


class Scripted(SocketServer):
    """A server on 127.0.0.1 that answers the Nth request it reads with ANSWERS[N]
    (then closes the connection when CLOSE), and records what it was sent."""

    concurrent = True

    def __init__(self, answers: list[bytes], close: bool = False) -> None:
        self.answers = list(answers)
        self.close = close
        self.requests: list[bytes] = []
        super().__init__()

    def talk(self, conn: socket.socket) -> None:
        data = b""
        while self.answers:
            read = read_head(conn, data)
            if read is None:
                return
            head, data = read
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(data) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            self.requests.append(head + b"\r\n\r\n" + data[:length])
            data = data[length:]
            conn.sendall(self.answers.pop(0))
            if self.close:
                return


@pytest.fixture
def serve() -> Iterator[list[Scripted]]:
    servers: list[Scripted] = []
    yield servers
    for server in servers:
        server.stop()


def gives_up_in_time(host: str, timeout: float, error: type[OSError], most: int) -> None:
    """A request to HOST, on a connection of TIMEOUT seconds reading at MOST bytes, ends
    in ERROR well within 5 s."""
    conn = http1.Connection(host, timeout)
    start = time.monotonic()
    with pytest.raises(error):
        conn.request("GET", "/", b"", {}, most)
    assert time.monotonic() - start < 5
    conn.close()


def connect(serve: list[Scripted], *answers: bytes, close: bool = False,
            timeout: float = 5.0) -> tuple[Scripted, http1.Connection]:
    server = Scripted(list(answers), close)
    serve.append(server)
    return server, http1.Connection(server.host, timeout)


def test_answers_of_each_framing_over_one_kept_connection(serve: list[Scripted]) -> None:
    server, conn = connect(
        serve,
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\nx-a: 2\r\n\r\nhello",
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    first = conn.request("GET", "/v2/", b"", {"Accept": "x"}, 100)
    assert (first.status, first.body, first.will_close) == (200, b"hello", False)
    assert first.headers[-2:] == [("x-a", "1"), ("x-a", "2")]
    second = conn.request("PUT", "/v2/a", b"data", {}, 100)
    assert (second.status, second.body, second.will_close) == (201, b"abcde", False)
    third = conn.request("GET", "/v2/b", b"", {}, 100)
    assert (third.status, third.reason, third.body) == (404, "Not Found", b"")
    fourth = conn.request("POST", "/v2/c", b"", {}, 100)
    assert (fourth.status, fourth.body, fourth.will_close) == (202, b"ok", True)
    assert server.connections == 1
    assert server.requests[0].startswith(b"GET /v2/ HTTP/1.1\r\nHost: " + server.host.encode())
    assert b"Content-Length: 4\r\n\r\ndata" in server.requests[1]
    assert b"Content-Length" not in server.requests[2]
    assert b"Content-Length: 0" in server.requests[3]


def test_a_body_longer_than_asked_is_cut_one_byte_past_and_the_connection_given_up(
        serve: list[Scripted]) -> None:
    for answer in (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789",
                   b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789"
                   b"\r\n0\r\n\r\n",
                   b"HTTP/1.0 200 OK\r\n\r\n0123456789"):
        _, conn = connect(serve, answer)
        reply = conn.request("GET", "/", b"", {}, 4)
        assert (reply.body, reply.will_close) == (b"01234", True)
        conn.close()


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
    b"SSH-2.0-OpenSSH_9.2\r\n",
    b"HTTP/1.1 2000 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n",
    b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000 + b"\r\n\r\n",
    b"HTTP/1.1 200 " + b"O" * 70000,
])
def test_nonsense_is_a_bad_answer(serve: list[Scripted], answer: bytes) -> None:
    _, conn = connect(serve, answer, close=True)
    with pytest.raises(http1.BadAnswer):
        conn.request("GET", "/", b"", {}, 1000)
    conn.close()


def test_a_closed_connection_and_a_silent_server(serve: list[Scripted]) -> None:
    _, conn = connect(serve, b"", close=True)  # reads the request, answers nothing, closes
    with pytest.raises(http1.Closed):
        conn.request("GET", "/", b"", {}, 10)
    conn.close()
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel accepts; nobody answers
    try:
        gives_up_in_time(f"127.0.0.1:{silent.getsockname()[1]}", 0.25, OSError, 10)
    finally:
        silent.close()


def test_a_header_with_a_line_break_is_never_sent() -> None:
    conn = http1.Connection("127.0.0.1:1", 1.0)
    with pytest.raises(ValueError):  # before any connection: port 1 would refuse it
        conn.request("GET", "/", b"", {"X": "a\r\nInjected: 1"}, 10)
    with pytest.raises(ValueError):
        conn.request("GET", "/x HTTP/1.1\r\nInjected: 1", b"", {}, 10)


def test_hosts_and_ports() -> None:
    assert http1.split_host("quay.io", 443) == ("quay.io", 443)
    assert http1.split_host("127.0.0.1:5000", 80) == ("127.0.0.1", 5000)
    assert http1.split_host("[::1]:5000", 80) == ("::1", 5000)
    assert http1.split_host("[::1]", 80) == ("::1", 80)
    with pytest.raises(http1.BadAnswer):
        http1.split_host("host:port", 80)


def test_each_address_of_a_name_is_tried_in_turn(monkeypatch: pytest.MonkeyPatch,
                                                 serve: list[Scripted]) -> None:
    """A plain connection (on the C socket, not `socket.create_connection`) tries each
    address the look-up gives, as create_connection does: the first refuses, the second
    answers. A name that is ASCII is looked up as bytes (no idna codec)."""
    import _socket

    server, _ = connect(serve, b"HTTP/1.1 204 No Content\r\n\r\n")
    port = int(server.host.rsplit(":", 1)[1])
    asked: list[object] = []

    def addresses(name: object, at: int, *rest: object) -> list[tuple[object, ...]]:
        asked.append(name)
        stream = (_socket.AF_INET, _socket.SOCK_STREAM, 6, "")
        return [(*stream, ("127.0.0.1", 1)), (*stream, ("127.0.0.1", at))]

    monkeypatch.setattr(_socket, "getaddrinfo", addresses)
    conn = http1.Connection(f"registry.test:{port}", 5.0)
    assert conn.request("GET", "/v2/", b"", {}, 10).status == 204
    conn.close()
    assert asked == [b"registry.test"]
    refused = http1.Connection("registry.test:1", 5.0)
    monkeypatch.setattr(_socket, "getaddrinfo", lambda *args: [addresses(*args)[0]])
    with pytest.raises(ConnectionRefusedError):
        refused.request("GET", "/v2/", b"", {}, 10)
