"""The registry client against a network that fails: a connection reset, refused, or an
answer that stalls past the timeout, on a request that may be sent again, is retried
through `tools.retry`'s one table and backoff, with the same attempt bound as a 429 (as
skopeo retries them); past the bound it fails naming the host and the error, never a
credential. A POST that starts a blob upload counts as one that may be sent again."""

from __future__ import annotations

import base64
import json
import socket
import struct
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from aipcc_build.tools import oci_registry
from aipcc_build.tools.oci_registry import Registry, RegistryRefused, sent_again
from aipcc_build.tools.retry import NetworkFailure, Retry, StillFailing, with_retries
from tests.support.socket_server import SocketServer, read_head

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
FAST = Retry(attempts=3, first=0.01, cap=0.01)  # the backoff injected, as the 429 tests do
SECRET = "user:hunter2-secret"


def reset(conn: socket.socket) -> None:
    """Close CONN with a TCP reset (SO_LINGER 0), not a FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


class Failing(SocketServer):
    """Fails the first FAILURES connections as FAIL says ("reset" after reading the
    request, "stall": reads it and answers nothing for STALL seconds), then answers OK; a
    negative FAILURES fails every connection. CHALLENGE: the first connection answers 401
    asking for Basic credentials instead."""

    concurrent = True

    def __init__(self, fail: str, failures: int, stall: float = 1.0,
                 challenge: bool = False) -> None:
        self.fail, self.failures, self.stall, self.challenge = fail, failures, stall, challenge
        self.requests: list[bytes] = []
        super().__init__()

    def talk(self, conn: socket.socket) -> None:
        number = self.connections
        conn.settimeout(5)
        first = conn.recv(65536)  # a TLS handshake too, reset at once (no head comes)
        failing = self.failures < 0 or number - self.challenge <= self.failures
        if failing and self.fail == "reset" and not (self.challenge and number == 1):
            self.requests.append(first)
            reset(conn)
            return
        read = read_head(conn, first) if first else None
        if read is None:
            return
        self.requests.append(read[0])
        if self.challenge and number == 1:
            conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=r\r\n"
                         b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            return
        if failing:
            time.sleep(self.stall)
            return
        conn.sendall(OK)


def client(server: Failing, authfile: str = "") -> Registry:
    made = Registry(server.host, tls_verify=False, authfile=authfile or None)
    made._scheme = "http"  # noqa: SLF001 (the plain-HTTP server: no TLS attempt first)
    return made


def retried(action: Callable[[], Any]) -> Any:
    waits: list[float] = []
    return with_retries(action, FAST, lambda n, wait, why: waits.append(wait),
                        sleep=lambda s: None)


@pytest.mark.parametrize("method, target", [
    ("GET", "/v2/rel/img/manifests/1"), ("HEAD", "/v2/rel/img/blobs/sha256:0"),
    ("PUT", "/v2/rel/img/manifests/1"), ("POST", "/v2/rel/img/blobs/uploads/")])
def test_a_reset_connection_is_retried(servers: list[Failing], method: str,
                                       target: str) -> None:
    server = Failing("reset", failures=1)
    servers.append(server)
    registry = client(server)
    assert retried(lambda: registry.request(method, target)).status == 200
    assert server.connections == 2


def test_a_refused_connection_is_retried_and_fails_after_the_bound() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    host = f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()  # nothing listens there now: refused
    registry = Registry(host, tls_verify=False)
    registry._scheme = "http"  # noqa: SLF001
    calls = []

    def attempt() -> Any:
        calls.append(1)
        return registry.request("GET", "/v2/rel/img/manifests/1")

    with pytest.raises(StillFailing) as failed:
        retried(attempt)
    assert len(calls) == FAST.attempts
    assert host in str(failed.value) and "Connection refused" in str(failed.value)
    assert failed.value.exit_code == 1


def test_an_answer_stalled_past_the_timeout_is_retried(
        servers: list[Failing], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oci_registry, "TIMEOUT", 0.3)
    server = Failing("stall", failures=1, stall=1.0)
    servers.append(server)
    registry = client(server)
    start = time.monotonic()
    assert retried(lambda: registry.request("GET", "/v2/rel/img/manifests/1")).status == 200
    assert time.monotonic() - start < 5
    assert server.connections == 2


def test_a_server_that_always_resets_fails_after_the_bound_naming_host_and_error(
        servers: list[Failing], tmp_path: Path) -> None:
    """And the credentials the request carried (Basic, from the auth file) appear nowhere
    in the message."""
    server = Failing("reset", failures=-1, challenge=True)
    servers.append(server)
    login = base64.b64encode(SECRET.encode()).decode()
    authfile = tmp_path / "auth.json"
    authfile.write_text(json.dumps({"auths": {server.host: {"auth": login}}}))
    registry = client(server, str(authfile))
    with pytest.raises(StillFailing) as failed:
        retried(lambda: registry.request("GET", "/v2/rel/img/manifests/1?token=sekrit"))
    message = str(failed.value) + failed.value.stderr
    assert server.host in message and "reset" in message.lower()
    assert login not in message and "hunter2" not in message and "sekrit" not in message
    assert any(b"Authorization: Basic" in r for r in server.requests)  # it was sent
    assert len(server.requests) == 1 + FAST.attempts  # the challenge, then each attempt


def test_a_request_that_may_not_be_sent_again_is_refused_at_once(
        servers: list[Failing]) -> None:
    server = Failing("reset", failures=-1)
    servers.append(server)
    registry = client(server)
    with pytest.raises(RegistryRefused, match="no answer from"):
        retried(lambda: registry.request("POST", "/v2/rel/img/tags/other"))
    assert server.connections == 1


def test_which_requests_are_sent_again() -> None:
    assert sent_again("GET", "/v2/a/manifests/1") and sent_again("PUT", "/v2/a/blobs/u?x=1")
    assert sent_again("POST", "/v2/a/blobs/uploads/?mount=x")
    assert not sent_again("POST", "/v2/a/other") and not sent_again("PATCH", "/v2/a/b")
    assert issubclass(NetworkFailure, Exception)
