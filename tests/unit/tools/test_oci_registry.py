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
