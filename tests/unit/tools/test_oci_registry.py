"""The registry client's connections: kept alive between requests, and opened again when
the server closed the one kept (as servers do with idle connections)."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from aipcc_build.oci import OCI_MANIFEST
from aipcc_build.tools.oci_registry import Registry

MANIFEST = b'{"schemaVersion":2,"mediaType":"' + OCI_MANIFEST.encode() + b'","layers":[]}'
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()


class Server:
    """A registry answering every manifest GET with MANIFEST over HTTP/1.1; CLOSING: it
    drops each connection after its answer without saying so."""

    def __init__(self, closing: bool) -> None:
        self.connections = 0
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
                self.send_response(200)
                self.send_header("Content-Type", OCI_MANIFEST)
                self.send_header("Content-Length", str(len(MANIFEST)))
                self.end_headers()
                self.wfile.write(MANIFEST)
                self.close_connection = closing

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
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
