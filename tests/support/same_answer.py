"""A server on 127.0.0.1 that answers every connection with the same bytes: a registry
that lies the same way to every request (tests of hostile answers)."""

from __future__ import annotations

import socket

from tests.support.socket_server import SocketServer


class SameAnswer(SocketServer):
    """Answers whatever each connection sends first with ANSWER, then closes it."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        super().__init__()

    def talk(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        conn.recv(65536)
        conn.sendall(self.answer)
        conn.shutdown(socket.SHUT_WR)
