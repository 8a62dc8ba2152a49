"""The registry client's connections (kept alive between requests, opened again when the
server closed the one kept, as servers do with idle connections) and its blob uploads
(one per blob and repository, however many threads put it)."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.oci import OCI_MANIFEST
from aipcc_build.tools.oci_registry import Registry, RegistryRefused, Reply
from tests.support.http_server import server_thread

MANIFEST = b'{"schemaVersion":2,"mediaType":"' + OCI_MANIFEST.encode() + b'","layers":[]}'
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()


class Server:
    """A registry answering every manifest GET with MANIFEST over HTTP/1.1; CLOSING: it
    drops each connection after its answer without saying so."""

    def __init__(self, closing: bool, base_status: int = 200) -> None:
        self.connections = 0
        self.paths: list[str] = []  # of the plain-HTTP requests read, in order
        self.closing = closing
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                server.connections += 1
                super().setup()

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.paths.append(self.path)
                if self.path == "/v2/" and base_status != 200:
                    self.send_error(base_status)
                    return
                self.send_response(200)
                self.send_header("Content-Type", OCI_MANIFEST)
                self.send_header("Content-Length", str(len(MANIFEST)))
                self.end_headers()
                self.wfile.write(MANIFEST)
                self.close_connection = closing

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = server_thread(self.httpd)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(params=[False, True], ids=["keeping", "closing"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    running = Server(closing=request.param)
    yield running
    running.stop()


def test_requests_share_one_connection_and_survive_a_closed_one(server: Server) -> None:
    client = Registry(server.host, tls_verify=False)
    client._scheme = "http"  # noqa: SLF001 (the plain-HTTP server: no TLS attempt first)
    for reference in ("1.0", DIGEST, "latest"):
        assert client.get_manifest("rel/img", reference) == (MANIFEST, OCI_MANIFEST)
    assert server.connections == (3 if server.closing else 1)


def test_threads_side_by_side_take_the_connections_earlier_requests_left() -> None:
    """Each round of requests side by side runs in new threads: they take the idle
    connections the rounds before left (on a TLS registry, a handshake each) instead of
    opening their own."""
    import functools

    from aipcc_build.tools.oci_registry import side_by_side

    server = Server(closing=False)
    try:
        client = Registry(server.host, tls_verify=False)
        client._scheme = "http"  # noqa: SLF001 (the plain-HTTP server: no TLS attempt first)
        client.get_manifest("rel/img", "1.0")
        for _ in range(3):
            found = side_by_side([functools.partial(client.get_manifest, "rel/img", tag)
                                  for tag in ("1.0", "2.0", "3.0")])
            assert found == [(MANIFEST, OCI_MANIFEST)] * 3
        assert server.connections <= 3  # never more than one round's requests at once
    finally:
        server.stop()


def test_threads_one_after_another_share_one_connection(server: Server) -> None:
    """Signing runs each image's requests in threads of their own (side_by_side): a
    connection opened by one is taken by the next, not one opened per thread."""
    from aipcc_build.tools.oci_registry import side_by_side

    client = Registry(server.host, tls_verify=False)
    client._scheme = "http"  # noqa: SLF001 (the plain-HTTP server: no TLS attempt first)
    for _ in range(3):
        assert side_by_side([lambda: client.get_manifest("rel/img", DIGEST)] * 2) \
            == [(MANIFEST, OCI_MANIFEST)] * 2
    # At most two at once: two connections, whichever threads asked.
    assert server.connections <= (6 if server.closing else 2)


def test_a_plain_registry_gets_no_tls_attempt(server: Server) -> None:
    """TLS verification off: a host that answers the API's base in plain HTTP as a
    registry does is asked in plain HTTP alone, on the base's connection (no TLS attempt
    first, no `ssl` loaded for it); a later client of the run (threads signing at once)
    asks no base again: the run found the host plain."""
    from aipcc_build.tools.registry_http import _PLAIN

    try:
        first = Registry(server.host, tls_verify=False)
        assert first.get_manifest("rel/img", DIGEST) == (MANIFEST, OCI_MANIFEST)
        assert server.paths == ["/v2/", f"/v2/rel/img/manifests/{DIGEST}"]
        assert server.connections == (2 if server.closing else 1)  # no TLS attempt
        assert _PLAIN[server.host] == ["http"]
        again = Registry(server.host, tls_verify=False)
        assert again.get_manifest("rel/img", DIGEST) == (MANIFEST, OCI_MANIFEST)
        assert server.paths[2:] == [f"/v2/rel/img/manifests/{DIGEST}"]
    finally:
        _PLAIN.pop(server.host, None)


@pytest.mark.parametrize("base_status", [400, 404])
def test_a_host_not_answering_the_base_as_a_registry_is_asked_in_tls_first(
        base_status: int) -> None:
    """A host whose base answers otherwise (a 400: nginx's or Go's answer to plain HTTP
    on a TLS port) is asked in TLS, then plain HTTP, as skopeo asks."""
    from aipcc_build.tools.registry_http import _PLAIN

    server = Server(closing=False, base_status=base_status)
    try:
        client = Registry(server.host, tls_verify=False)
        assert client.get_manifest("rel/img", DIGEST) == (MANIFEST, OCI_MANIFEST)
        assert server.paths == ["/v2/", f"/v2/rel/img/manifests/{DIGEST}"]
        # The base's, the TLS attempt's (no request read), the manifest's.
        assert server.connections == 3
    finally:
        server.stop()
        _PLAIN.pop(server.host, None)


def test_with_tls_verification_on_nothing_goes_out_in_plain_http(server: Server) -> None:
    client = Registry(server.host)
    with pytest.raises(RegistryRefused, match="no answer"):
        client.get_manifest("rel/img", DIGEST)
    assert server.paths == []  # a TLS handshake the plain server could not read


def test_a_tls_registry_with_verification_off_is_reached_over_tls(tmp_path: Path) -> None:
    """The base asked in plain HTTP of a host speaking TLS fails (the server reads no
    request of it): the host is asked in TLS, unverified, as before."""
    import ssl

    from aipcc_build.tools.registry_http import _PLAIN
    from tests.support.certs import certificates
    from tests.support.http_server import serving

    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", OCI_MANIFEST)
            self.send_header("Content-Length", str(len(MANIFEST)))
            self.end_headers()
            self.wfile.write(MANIFEST)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    certificates(tmp_path / "tls")
    context.load_cert_chain(tmp_path / "tls" / "server.pem", tmp_path / "tls" / "server-key.pem")
    with serving(Handler, context) as origin:
        host = origin[len("https://"):]
        try:
            client = Registry(host, tls_verify=False)
            assert client.get_manifest("rel/img", DIGEST) == (MANIFEST, OCI_MANIFEST)
            assert client._scheme == "https"  # noqa: SLF001
            assert seen == [f"/v2/rel/img/manifests/{DIGEST}"]  # over TLS: no base
            assert host not in _PLAIN
        finally:
            _PLAIN.pop(host, None)


def test_side_by_side_keeps_the_order_and_raises_the_first_failure() -> None:
    import time

    from aipcc_build.tools.oci_registry import SIDE_BY_SIDE, side_by_side

    running, most = [0], [0]
    lock = threading.Lock()

    def call(n: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        if n in (5, 7):
            raise ValueError(n)
        return n

    assert side_by_side([lambda n=n: call(n) for n in range(4)]) == [0, 1, 2, 3]
    assert side_by_side([]) == []
    with pytest.raises(ValueError, match="5"):
        side_by_side([lambda n=n: call(n) for n in range(40)])
    assert most[0] == SIDE_BY_SIDE


def test_a_blob_two_threads_put_at_once_is_uploaded_once() -> None:
    # distribution 2.8 rewrites a repository's link to a blob at each upload: a second
    # upload beside a manifest naming the blob got that manifest refused (DIGEST_INVALID).
    posts: list[str] = []
    started, release = threading.Event(), threading.Event()
    client = Registry("registry.test")

    def request(method: str, target: str, body: bytes = b"", headers: Any = None,
                scope: str = "", max_body: int = 0) -> Reply:
        if method == "POST":
            posts.append(target)
            started.set()
            release.wait(5)
            return Reply(202, {"location": "/v2/rel/img/blobs/uploads/1"}, b"")
        return Reply(201, {}, b"")

    client.request = request  # type: ignore[method-assign]
    first = threading.Thread(target=client.put_blob, args=("rel/img", b"{}"))
    first.start()
    assert started.wait(5)
    second = threading.Thread(target=client.put_blob, args=("rel/img", b"{}"))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # it waits for the first upload, not sends its own
    release.set()
    first.join(5)
    second.join(5)
    assert posts == ["/v2/rel/img/blobs/uploads/"]
    client.put_blob("rel/other", b"{}")  # another repository: its own upload
    assert len(posts) == 2


def test_a_failed_upload_leaves_the_blob_to_the_next_put() -> None:
    client = Registry("registry.test")
    answers = [Reply(500, {}, b""), Reply(202, {"location": "/u/2"}, b""),
               Reply(201, {}, b"")]
    client.request = lambda *a, **k: answers.pop(0)  # type: ignore[method-assign]
    with pytest.raises(RegistryRefused):
        client.put_blob("rel/img", b"{}")
    client.put_blob("rel/img", b"{}")
    assert not answers


def test_blobs_sent_already_start_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # After promote's read-back an image's blobs are mostly up (sent while it copied): a
    # thread started for each, on a loaded host, waited to be run for nothing.
    client = Registry("registry.test")
    sent: list[str] = []
    client.request = lambda method, target, *a, **k: (  # type: ignore[method-assign]
        sent.append(method), Reply(202 if method == "POST" else 201,
                                   {"location": "/u/1"}, b""))[1]
    client.put_blobs("rel/img", [b"{}", b"payload"])
    import _thread

    from aipcc_build.tools import oci_registry

    started: list[object] = []
    real_start = _thread.start_new_thread
    monkeypatch.setattr(oci_registry._thread, "start_new_thread",
                        lambda *args: (started.append(args), real_start(*args))[1])
    client.put_blobs("rel/img", [b"{}", b"payload", b"envelope"])
    assert started == []  # the one new blob sent in this thread
    assert sent == ["POST", "PUT"] * 3
    client.put_blobs("rel/other", [b"{}", b"payload"])  # another repository's: sent
    assert len(started) == 1 and len(sent) == 10


def test_an_upload_opened_ahead_sends_its_blob_in_one_request() -> None:
    client = Registry("registry.test")
    sent: list[tuple[str, str]] = []
    sessions = iter(range(1, 10))

    def request(method: str, target: str, *args: Any, **kwargs: Any) -> Reply:
        sent.append((method, target.split("?")[0]))
        if method == "POST":
            return Reply(202, {"location": f"/v2/rel/img/blobs/uploads/{next(sessions)}"},
                         b"")
        if target.startswith("/v2/rel/img/blobs/uploads/1?"):  # the registry dropped it
            return Reply(404, {}, b'{"errors": [{"code": "BLOB_UPLOAD_UNKNOWN"}]}')
        return Reply(201, {}, b"")

    client.request = request  # type: ignore[method-assign]
    client.open_uploads("rel/img", 2)
    assert [method for method, _ in sent] == ["POST", "POST"]
    sent.clear()
    client.put_blob("rel/img", b"envelope")  # a session opened ahead: one request
    assert sent == [("PUT", "/v2/rel/img/blobs/uploads/2")]
    sent.clear()
    # A session the registry dropped (purged, restarted): the blob goes up in a new one.
    client.put_blob("rel/img", b"another")
    assert sent == [("PUT", "/v2/rel/img/blobs/uploads/1"), ("POST", "/v2/rel/img/blobs/uploads/"),
                    ("PUT", "/v2/rel/img/blobs/uploads/3")]
    sent.clear()
    client.put_blob("rel/img", b"third")  # none left: POST, then PUT
    assert [method for method, _ in sent] == ["POST", "PUT"]
    client.put_blob("rel/other", b"x")  # sessions are the repository's own
    assert [method for method, _ in sent][-2:] == ["POST", "PUT"]


@pytest.mark.parametrize("answer, then", [
    (201, []),  # mounted: nothing else sent
    (202, [("PUT", "/v2/rel/b/blobs/uploads/9")]),  # a session instead: the bytes go in it
    (401, [("POST", "/v2/rel/b/blobs/uploads/"), ("PUT", "/v2/rel/b/blobs/uploads/1")]),
])
def test_a_blob_sent_to_another_repository_is_mounted_or_uploaded(
        answer: int, then: list[tuple[str, str]]) -> None:
    """A blob this run sent to one repository of the registry goes to another by a
    cross-repository mount (one request, not two); a registry answering it with an upload
    session of its own gets the bytes in it, one refusing it a plain upload, and neither
    is asked to mount again."""
    client = Registry("registry.test")
    sent: list[tuple[str, str]] = []

    def request(method: str, target: str, *args: Any, **kwargs: Any) -> Reply:
        sent.append((method, target.split("&digest=")[0].split("?_")[0]))
        if method == "POST" and "mount=" in target:
            return Reply(answer, {"location": "/v2/rel/b/blobs/uploads/9?_state=x"}, b"")
        if method == "POST":
            return Reply(202, {"location": "/v2/rel/b/blobs/uploads/1?_state=x"}, b"")
        return Reply(201, {}, b"")

    client.request = request  # type: ignore[method-assign]
    client.put_blob("rel/a", b"{}")
    sent.clear()
    client.put_blob("rel/b", b"{}")
    mount = ("POST", f"/v2/rel/b/blobs/uploads/?mount=sha256%3A{hashlib.sha256(b'{}').hexdigest()}"
                     "&from=rel%2Fa")
    assert sent == [mount, *then]
    sent.clear()
    client.put_blob("rel/c", b"{}")  # asked to mount again only where it mounted
    if answer == 201:
        assert len(sent) == 1 and "mount=" in sent[0][1]
    else:
        assert [method for method, _ in sent] == ["POST", "PUT"] and "mount" not in sent[0][1]


def test_repositories_sending_one_blob_at_once_upload_it_once_and_mount_it() -> None:
    """The repositories of a promote send the empty config at once: the first upload is
    made, the others wait for it and mount what it sent (none waits for another waiter)."""
    client = Registry("registry.test")
    sent: list[str] = []
    release = threading.Event()

    def request(method: str, target: str, *args: Any, **kwargs: Any) -> Reply:
        sent.append("mount" if "mount=" in target else method)
        if method == "POST" and "mount=" not in target:
            release.wait(5)  # the first upload is slow: the others start meanwhile
            return Reply(202, {"location": "/v2/rel/a/blobs/uploads/1"}, b"")
        return Reply(201, {}, b"")

    client.request = request  # type: ignore[method-assign]
    threads = [threading.Thread(target=client.put_blob, args=(f"rel/{name}", b"{}"))
               for name in "abc"]
    for thread in threads:
        thread.start()
    threads[0].join(0.2)
    release.set()
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()
    assert sorted(sent) == ["POST", "PUT", "mount", "mount"]
