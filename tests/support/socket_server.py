"""A server on 127.0.0.1, on a free port, that talks to each connection as a test scripts
it (a registry that lies, stalls, trickles or closes): the one listener, accept loop and
stop under every such server of the tests."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Optional


class SocketServer:
    """Hands each connection it accepts to `talk` (a subclass's), one after another in the
    server's thread, or each in a thread of its own when CONCURRENT; an OSError ends a
    connection. Counts the connections; `stop` ends the accept loop and waits for it.
    A subclass sets what `talk` reads before calling this constructor."""

    concurrent = False

    def __init__(self) -> None:
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.host = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def talk(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            if self.concurrent:
                threading.Thread(target=self._talk_and_close, args=(conn,),
                                 daemon=True).start()
            else:
                self._talk_and_close(conn)

    def _talk_and_close(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            self.talk(conn)

    def stop(self) -> None:
        # close() alone leaves accept() waiting on Linux: the thread would outlive the
        # test, and later tests would run with a thread (the scan pool then forks through
        # forkserver).
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(timeout=10)


def read_head(conn: socket.socket, data: bytes) -> Optional[tuple[bytes, bytes]]:
    """(the head of the next request, what came after it) read from CONN, DATA the bytes
    already read past the last request; None when the peer closes first."""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest
