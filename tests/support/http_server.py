"""A request handler served on 127.0.0.1 in a thread, for tests that need an HTTP peer
of their own (a token service, a scripted Pulp)."""

from __future__ import annotations

import contextlib
import http.server
import socketserver
import ssl
import threading
from collections.abc import Iterator
from typing import Optional


def server_thread(server: socketserver.BaseServer) -> threading.Thread:
    """A daemon thread (not started) serving SERVER until its shutdown(), which waits for
    the loop's next look at the flag: every 50 ms, not socketserver's 0.5 s (each server a
    test stopped cost it half a second)."""
    return threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                            daemon=True)


@contextlib.contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler],
            tls: Optional[ssl.SSLContext] = None) -> Iterator[str]:
    """HANDLER on a free port; yields its origin, http://127.0.0.1:PORT (https:// with a
    server-side TLS context)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = server_thread(server)
    thread.start()
    try:
        scheme = "https" if tls is not None else "http"
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
