"""The registry client against registries and auth files found to break it: a blob
redirected to a path on the same registry (a relative Location: the client connected to
no host, an OSError, exit 2), or to a host that does not answer, or with no Location; a
token service that does not answer; an auth file whose entry holds a line break (a
ValueError, a traceback). Each is RegistryRefused naming the registry (exit 1) or an
InputError naming the auth file (exit 2), never a credential; credentials follow a
redirect on the same registry and never one to another host."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from aipcc_build.errors import InputError
from aipcc_build.tools.oci_registry import Registry, RegistryRefused
from aipcc_build.tools.retry import NetworkFailure, TransientAnswer
from tests.support.http_server import serving
from tests.support.socket_server import SocketServer

BLOB = b'{"sbom": true}'
BLOB_DIGEST = "sha256:" + hashlib.sha256(BLOB).hexdigest()
LOGIN = base64.b64encode(b"user:secret-password").decode()


def handler(answer: Callable[[http.server.BaseHTTPRequestHandler], tuple[int, dict[str, str],
                                                                          bytes]],
            seen: list[tuple[str, str]]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append((self.path, self.headers.get("Authorization", "")))
            status, headers, body = answer(self)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def basic_registry(location: Callable[[], str]) -> Callable[..., tuple[int, dict[str, str],
                                                                        bytes]]:
    """A registry wanting Basic LOGIN everywhere, redirecting the blob to LOCATION()."""
    def answer(request: http.server.BaseHTTPRequestHandler) -> tuple[int, dict[str, str],
                                                                      bytes]:
        if request.headers.get("Authorization") != f"Basic {LOGIN}":
            return 401, {"WWW-Authenticate": 'Basic realm="test"'}, b""
        if request.path.startswith("/v2/rel/img/blobs/"):
            where = location()
            return 307, ({"Location": where} if where else {}), b""
        if request.path == "/storage/blob?sig=1":
            return 200, {}, BLOB
        return 404, {}, b""
    return answer


@pytest.fixture
def authfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "auth.json"
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(path))
    yield path


def client_of(origin: str, authfile: Path) -> Registry:
    host = origin.split("://", 1)[1]
    authfile.write_text(json.dumps({"auths": {host: {"auth": LOGIN}}}))
    client = Registry(host, tls_verify=False, authfile=str(authfile))
    client._scheme = "http"  # noqa: SLF001 (the plain-HTTP server: no TLS attempt first)
    return client


def test_a_blob_redirected_on_the_same_registry_is_read_with_the_login(
        authfile: Path) -> None:
    seen: list[tuple[str, str]] = []
    with serving(handler(basic_registry(lambda: "/storage/blob?sig=1"), seen)) as origin:
        assert client_of(origin, authfile).get_blob("rel/img", BLOB_DIGEST) == BLOB
    assert seen[-1] == ("/storage/blob?sig=1", f"Basic {LOGIN}")


def test_a_blob_redirected_to_another_host_is_read_without_the_login(
        authfile: Path) -> None:
    seen: list[tuple[str, str]] = []
    stored: list[tuple[str, str]] = []
    with serving(handler(lambda r: (200, {}, BLOB), stored)) as storage, \
            serving(handler(basic_registry(lambda: f"{storage}/storage/blob?sig=1"),
                            seen)) as origin:
        assert client_of(origin, authfile).get_blob("rel/img", BLOB_DIGEST) == BLOB
    assert stored == [("/storage/blob?sig=1", "")]


@pytest.mark.parametrize("where", ["http://127.0.0.1:{port}/storage/blob?sig=secret",
                                   ""], ids=["silent-host", "no-location"])
def test_a_redirect_nowhere_is_refused_naming_the_registry(authfile: Path,
                                                           where: str) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    seen: list[tuple[str, str]] = []
    with serving(handler(basic_registry(lambda: where.format(port=port)), seen)) as origin, \
            pytest.raises((RegistryRefused, NetworkFailure)) as refused:
        client_of(origin, authfile).get_blob("rel/img", BLOB_DIGEST)
    # A host that refuses the connection may answer later (retried by the caller through
    # tools.retry); no Location is a refusal.
    assert isinstance(refused.value, NetworkFailure if where else RegistryRefused)
    message = str(refused.value)
    assert origin.split("://", 1)[1] in message
    assert "secret" not in message and LOGIN not in message


def test_a_redirect_to_a_busy_host_is_transient(authfile: Path) -> None:
    seen: list[tuple[str, str]] = []
    with serving(handler(lambda r: (503, {"Retry-After": "2"}, b""), [])) as storage, \
            serving(handler(basic_registry(lambda: f"{storage}/storage/blob?sig=secret"),
                            seen)) as origin, pytest.raises(TransientAnswer) as busy:
        client_of(origin, authfile).get_blob("rel/img", BLOB_DIGEST)
    assert "retry after 2 s" in str(busy.value.stderr)
    assert "secret" not in str(busy.value.stderr)


def test_a_token_service_that_does_not_answer_is_refused(authfile: Path) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    challenge = f'Bearer realm="http://127.0.0.1:{port}/token",service="test"'
    with serving(handler(lambda r: (401, {"WWW-Authenticate": challenge}, b""), [])) \
            as origin, pytest.raises(NetworkFailure) as refused:  # retried by the caller
        client_of(origin, authfile).get_manifest("rel/img", "1")
    assert "token" in str(refused.value) and LOGIN not in str(refused.value)


@pytest.mark.parametrize("auth", [f"{LOGIN}\r\nX-Injected: 1", f"{LOGIN}\n", "a\x00b"])
def test_an_auth_entry_that_is_no_header_value_is_an_input_error(authfile: Path,
                                                                 auth: str) -> None:
    seen: list[tuple[str, str]] = []
    with serving(handler(basic_registry(lambda: ""), seen)) as origin:
        client = client_of(origin, authfile)
        authfile.write_text(json.dumps({"auths": {client.host: {"auth": auth}}}))
        with pytest.raises(InputError) as refused:
            client.get_manifest("rel/img", "1")
    assert LOGIN not in str(refused.value)
    assert refused.value.file == str(authfile)
    assert all("Injected" not in header for _, header in seen)


def test_a_blob_too_large_is_refused_without_the_signed_urls_query(authfile: Path,
                                                                   monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    """A storage host's answer past the bound (an SBOM of a gigabyte, here of 2 KiB past
    a bound of 1 KiB): refused, naming the URL without its query, which holds the
    storage's signature."""
    with serving(handler(lambda r: (200, {}, b"x" * 3072), [])) as storage, \
            serving(handler(basic_registry(
                lambda: f"{storage}/storage/blob?X-Amz-Signature=secret"), [])) as origin, \
            pytest.raises(RegistryRefused) as refused:
        client_of(origin, authfile).get_blob("rel/img", BLOB_DIGEST, 1024)
    assert "larger than 1024 bytes" in str(refused.value)
    assert "secret" not in str(refused.value)


@pytest.mark.parametrize("kind", ["fifo", "device", "huge", "deep"])
def test_an_auth_file_that_is_no_small_regular_file_is_an_input_error_not_a_hang(
        tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO without a writer hung the read; /dev/zero was read for ever, into memory."""
    import os

    from aipcc_build.tools import oci_registry

    path = tmp_path / "auth.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "huge":
        monkeypatch.setattr(oci_registry, "MAX_AUTH_FILE", 100)
        path.write_text(json.dumps({"auths": {}, "pad": "x" * 200}))
    else:
        path.write_text("[" * 100000)
    with pytest.raises(InputError) as refused:
        oci_registry.credentials("registry.test", str(path))
    assert refused.value.file == str(path)


@pytest.mark.parametrize("token", ["abc\r\nX-Injected: 1", ["a"], 7, ""])
def test_a_token_that_is_no_header_value_is_refused(authfile: Path, token: Any) -> None:
    """A token service's token holding a line break went into the next request's
    header: a ValueError (a traceback), or a header injected."""
    seen: list[tuple[str, str]] = []
    tokens: list[tuple[str, str]] = []
    with serving(handler(lambda r: (200, {}, json.dumps({"token": token}).encode()),
                         tokens)) as service:
        challenge = f'Bearer realm="{service}/token",service="test"'
        with serving(handler(lambda r: (401, {"WWW-Authenticate": challenge}, b""), seen)) \
                as origin, pytest.raises(RegistryRefused) as refused:
            client_of(origin, authfile).get_manifest("rel/img", "1")
    assert "sent no token" in str(refused.value)
    assert len(seen) == 1 and len(tokens) == 1


def test_a_manifest_or_blob_whose_bytes_are_not_its_digest_is_refused(
        authfile: Path) -> None:
    """A registry serving, under a digest, bytes that hash to another (its
    Docker-Content-Digest header agreeing with the digest asked)."""
    def lying(request: http.server.BaseHTTPRequestHandler) -> tuple[int, dict[str, str],
                                                                    bytes]:
        asked = request.path.rsplit("/", 1)[1]
        return 200, {"Docker-Content-Digest": asked,
                     "Content-Type": "application/vnd.oci.image.manifest.v1+json"}, b"{}"

    with serving(handler(lying, [])) as origin:
        client = client_of(origin, authfile)
        with pytest.raises(RegistryRefused, match="a manifest of another digest"):
            client.get_manifest("rel/img", BLOB_DIGEST)
        with pytest.raises(RegistryRefused, match="a blob of another digest"):
            client.get_blob("rel/img", BLOB_DIGEST)


class Endless(SocketServer):
    """A registry whose every answer is 200 with HEAD (a 1 GiB Content-Length, or
    chunks), then zeros for as long as the client reads."""

    def __init__(self, head: bytes, chunked: bool) -> None:
        self.head, self.chunked, self.sent = head, chunked, 0
        super().__init__()

    def talk(self, conn: socket.socket) -> None:
        block = b"\0" * 65536
        if self.chunked:
            block = b"10000\r\n" + block + b"\r\n"
        conn.recv(65536)
        conn.sendall(self.head)
        while self.sent < 1 << 30:
            conn.sendall(block)
            self.sent += len(block)


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
def test_a_blob_of_a_gigabyte_is_read_no_further_than_the_bound(chunked: bool) -> None:
    head = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" if chunked else
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (1 << 30))
    server = Endless(head, chunked)
    try:
        registry = Registry(server.host, tls_verify=False)
        registry._scheme = "http"  # noqa: SLF001 (the plain-HTTP server: no TLS attempt)
        with pytest.raises(RegistryRefused, match="larger than 16777216 bytes"):
            registry.get_blob("rel/img", BLOB_DIGEST)
    finally:
        server.stop()
    assert server.sent < 64 << 20  # the client stopped reading; the server, sending
