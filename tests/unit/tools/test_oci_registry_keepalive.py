"""The registry client's kept-alive connections against servers that close them: closed
while idle (the next request goes on a new connection, never onto the dead one), and
closed after reading a request without answering it (a GET, PUT or the POST that starts a
blob upload is sent once more at once on a new connection; another POST, which the server
may have acted on, is not)."""

from __future__ import annotations

import socket
import time

import pytest

from aipcc_build.tools.oci_registry import Registry, RegistryRefused
from tests.support.socket_server import SocketServer, read_head

OK = b"HTTP/1.1 202 Accepted\r\nLocation: /v2/rel/img/blobs/uploads/1\r\nContent-Length: 0\r\n\r\n"


class Server(SocketServer):
    """Answers each request with OK, on connections it keeps; SILENT_AFTER: on each
    connection, the request after that many is read and the connection closed unanswered;
    IDLE_CLOSE: each connection closed this long after its last answer."""

    concurrent = True

    def __init__(self, silent_after: int = 0, idle_close: float = 0.0) -> None:
        self.silent_after, self.idle_close = silent_after, idle_close
        self.requests: list[bytes] = []
        super().__init__()

    def talk(self, conn: socket.socket) -> None:
        answered = 0
        data = b""
        while True:
            conn.settimeout(self.idle_close or 10)
            read = read_head(conn, data)
            if read is None:
                return
            head, data = read
            self.requests.append(head.split(b"\r\n", 1)[0])
            if self.silent_after and answered == self.silent_after:
                return
            conn.sendall(OK)
            answered += 1


def client(server: Server) -> Registry:
    made = Registry(server.host, tls_verify=False)
    made._scheme = "http"  # noqa: SLF001 (the plain-HTTP server: no TLS attempt first)
    return made


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_connection_the_server_closed_while_idle_is_left_for_a_new_one(
        servers: list[Server], method: str) -> None:
    server = Server(idle_close=0.2)
    servers.append(server)
    registry = client(server)
    registry.request(method, "/v2/rel/img/blobs/uploads/")
    time.sleep(0.6)  # the server has closed the kept connection
    assert registry.request(method, "/v2/rel/img/blobs/uploads/").status == 202
    assert len(server.requests) == 2 and server.connections == 2


@pytest.mark.parametrize(("method", "target", "sent"), [
    ("GET", "/v2/rel/img/blobs/uploads/", 3), ("PUT", "/v2/rel/img/blobs/uploads/", 3),
    ("POST", "/v2/rel/img/blobs/uploads/", 3), ("POST", "/v2/rel/img/other", 2)])
def test_a_request_read_and_left_unanswered_is_sent_again_only_when_idempotent(
        servers: list[Server], method: str, target: str, sent: int) -> None:
    """A POST that starts a blob upload counts as one: a session the first may have
    opened is left unused."""
    server = Server(silent_after=1)
    servers.append(server)
    registry = client(server)
    registry.request(method, target)
    if sent == 3:
        assert registry.request(method, target).status == 202
    else:
        with pytest.raises(RegistryRefused, match="no answer"):
            registry.request(method, target)
    assert len(server.requests) == sent
