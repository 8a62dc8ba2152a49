"""One HTTP/1.1 connection to a host, kept alive between requests: what the registry clients
(`oci_registry`, `registry_http`) need of `http.client`, without its import, which loads the `email`
package to parse headers (with `calendar`, `locale`, `datetime`, `random`...: an eighth of
what a `verify` of one image runs, more than the check itself).

Every read is bounded: a status or header line at most MAX_LINE bytes, at most MAX_HEADERS
headers, a body at most what the caller asks for (one byte more says it was longer). A
malformed answer raises `BadAnswer`, an OSError: to the caller, a host that answers
nonsense is one that does not answer. Every socket operation has the connection's
timeout, and an answer that keeps coming slower than MIN_RATE (a byte every few seconds,
each read within the timeout) ends in a timeout too."""

from __future__ import annotations

import _socket
import io
import select
import time

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    import socket
    import ssl
    from typing import Any, Optional, Union

MAX_LINE = 65536
MAX_HEADERS = 100  # and at most as many trailers, and interim (1xx) answers before one
# The slowest an answer may come, in bytes a second, after the connection's timeout: the
# time an answer may take grows with what it brought.
MIN_RATE = 16 * 1024


class BadAnswer(OSError):
    """The server's answer is not HTTP/1.x as this client reads it."""


class Closed(ConnectionResetError):
    """The server closed the connection before answering (as servers do with a connection
    kept idle): the request may be sent again on a new one."""


class Response:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes,
                 will_close: bool, reason: str = "") -> None:
        self.status = status
        self.reason = reason  # the status line's words ("Not Found")
        self.headers = headers  # (name in lower case, value), in order
        self.body = body
        self.will_close = will_close  # the connection cannot carry another request


def split_host(host: str, default_port: int) -> tuple[str, int]:
    """(name, port) of HOST[:PORT] ("[v6]:port" too)."""
    name, port = host, ""
    if host.startswith("["):
        end = host.find("]")
        name, port = host[1:end], host[end + 2:] if host[end + 1:end + 2] == ":" else ""
    elif host.count(":") == 1:
        name, _, port = host.partition(":")
    if port and not _decimal(port):
        raise BadAnswer(f"not a port: {port[:20]!r}")  # nothing asked yet: an OSError
    if not name or not name.isprintable() or " " in name:
        raise BadAnswer(f"not a host: {name[:40]!r}")
    return name, int(port) if port else default_port


def _looked_up(name: str) -> Any:
    """NAME as the address look-up takes it: an ASCII name as bytes (which it takes,
    typeshed aside). As text, it is encoded with the `idna` codec, whose import (with
    `unicodedata` and `stringprep`) costs more than a request to a registry on this host."""
    return name.encode() if name.isascii() else name


def _connected(name: str, port: int, timeout: float) -> _socket.socket:
    """A TCP connection to NAME:PORT, each address the look-up gives tried in turn (as
    `socket.create_connection` does); the last address's error when none answers."""
    failure: Optional[OSError] = None
    for family, kind, proto, _, address in _socket.getaddrinfo(
            _looked_up(name), port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            failure = exc
    raise failure or OSError(f"no address for {name}")


class Connection:
    """HOST[:PORT] over TCP, or over TLS with CONTEXT (an ssl.SSLContext)."""

    def __init__(self, host: str, timeout: float,
                 context: Optional[ssl.SSLContext] = None) -> None:
        self.host = host
        self.timeout = timeout
        self.context = context
        self._sock: Optional[Union[socket.socket, _socket.socket]] = None
        self._paced: Optional[_Paced] = None
        self._file: Optional[io.BufferedReader] = None

    def _open(self) -> None:
        name, port = split_host(self.host, 443 if self.context is not None else 80)
        if self.context is None:
            # Plain HTTP on the C socket: the `socket` module builds four enums of the C
            # module's constants at import, more than a request to a registry on this host
            # costs (`verify` of one image, issue 40). TLS needs `socket`, and loads it.
            self._sock = _connected(name, port, self.timeout)
        else:
            import socket

            sock = socket.create_connection((_looked_up(name), port), self.timeout)
            try:
                self._sock = self.context.wrap_socket(sock, server_hostname=name)
            except BaseException:
                sock.close()
                raise
        self._paced = _Paced(self._sock, self.timeout)
        self._file = io.BufferedReader(self._paced)

    def request(self, method: str, target: str, body: bytes, headers: dict[str, str],
                max_body: int) -> Response:
        """METHOD TARGET with BODY; the answer, its body read up to MAX_BODY + 1 bytes."""
        split_host(self.host, 0)  # a host no Host line can carry is no host to ask
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host}",
                 "Accept-Encoding: identity"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        for line in lines:
            if "\r" in line or "\n" in line:
                raise ValueError("a line of the request holds a line break")
        if self._sock is None:
            self._open()
        assert self._sock is not None and self._paced is not None
        self._sock.settimeout(self.timeout)  # the last answer's read may have cut it
        self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        self._paced.start()
        for _ in range(MAX_HEADERS):
            response = self._read_response(method, max_body)
            if response.status == 101:  # no upgrade was asked for: what follows is no HTTP
                raise BadAnswer("the server switched protocols unasked (101)")
            if not 100 <= response.status < 200:
                return response
            # 100 Continue and the like: the answer follows
        raise BadAnswer(f"more than {MAX_HEADERS} interim (1xx) answers")

    def dropped(self) -> bool:
        """Whether the server closed this idle connection (or sent what nobody asked
        for): its socket reads without waiting. Asked before a kept connection is used
        again, so that a request the server may act on is not written to a dead one."""
        if self._sock is None:
            return False
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
        except (OSError, ValueError):  # closed under us
            return True
        return bool(readable)

    def _line(self) -> bytes:
        assert self._file is not None
        line = self._file.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise BadAnswer("a line of the answer is too long")
        return bytes(line)

    def _read_response(self, method: str, max_body: int) -> Response:
        first = self._line()
        if not first:
            raise Closed("the server closed the connection without answering")
        parts = first.decode("latin-1").rstrip("\r\n").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or len(parts[1]) != 3 \
                or not _decimal(parts[1]):
            raise BadAnswer(f"not an HTTP/1.x status line: {first[:40]!r}")
        status, reason = int(parts[1]), parts[2] if len(parts) > 2 else ""
        headers: list[tuple[str, str]] = []
        while True:
            line = self._line()
            if line in (b"\r\n", b"\n", b""):
                break
            if len(headers) >= MAX_HEADERS:
                raise BadAnswer(f"more than {MAX_HEADERS} headers")
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon or not name or name != name.strip():
                raise BadAnswer(f"not a header: {line[:40]!r}")
            headers.append((name.lower(), value.strip()))
        fields: dict[str, str] = {}
        for name, value in headers:
            fields[name] = f"{fields[name]}, {value}" if name in fields else value
        tokens = {t.strip().lower() for t in fields.get("connection", "").split(",")}
        will_close = "close" in tokens or parts[0] == "HTTP/1.0" and "keep-alive" not in tokens
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return Response(status, headers, b"", will_close, reason)
        length = fields.get("content-length")
        if "transfer-encoding" in fields:
            # Only `chunked` is read (this client asks for no other coding); with a
            # Content-Length beside it, the chunks frame the body (RFC 9112 6.3) and the
            # connection, whose framing two headers dispute, carries nothing more.
            if fields["transfer-encoding"].strip().lower() != "chunked":
                raise BadAnswer("not a transfer coding this client reads: "
                                f"{fields['transfer-encoding'][:40]!r}")
            body, whole = self._chunked(max_body)
            return Response(status, headers, body,
                            will_close or not whole or length is not None, reason)
        if length is None:  # the body ends where the connection does
            return Response(status, headers, self._read(max_body + 1, exact=False), True,
                            reason)
        if not _decimal(length):
            raise BadAnswer(f"not a Content-Length: {length[:40]!r}")
        wanted = int(length)
        body = self._read(min(wanted, max_body + 1), exact=True)
        return Response(status, headers, body, will_close or wanted > len(body), reason)

    def _read(self, size: int, exact: bool) -> bytes:
        assert self._file is not None
        data = self._file.read(size)
        if exact and len(data) < size:
            raise BadAnswer(f"the answer ended after {len(data)} of {size} bytes")
        return bytes(data)

    def _chunked(self, max_body: int) -> tuple[bytes, bool]:
        """The body of a chunked answer, up to MAX_BODY + 1 bytes; whether it was all read
        (trailers included: the connection can carry the next request)."""
        body = bytearray()
        while True:
            size_text = self._line().split(b";", 1)[0].strip()
            if not 0 < len(size_text) <= 16 or size_text.strip(b"0123456789abcdefABCDEF"):
                raise BadAnswer(f"not a chunk size: {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                for _ in range(MAX_HEADERS + 1):
                    if self._line() in (b"\r\n", b"\n", b""):  # after the trailers
                        return bytes(body), True
                raise BadAnswer(f"more than {MAX_HEADERS} trailers")
            room = max_body + 1 - len(body)
            body += self._read(min(size, room), exact=True)
            if size >= room:
                return bytes(body), False
            if self._line() not in (b"\r\n", b"\n"):
                raise BadAnswer("a chunk does not end where its size says")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            self._paced = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class _Paced(io.RawIOBase):
    """SOCK's bytes, each read within TIMEOUT seconds, and the answer since `start` at
    MIN_RATE at least (after TIMEOUT): the sum of a trickle's reads is bounded too."""

    def __init__(self, sock: Union[socket.socket, _socket.socket], timeout: float) -> None:
        super().__init__()
        self._sock = sock
        self._timeout = timeout
        self.start()

    def start(self) -> None:
        self._began = time.monotonic()
        self._received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        left = self._began + self._timeout + self._received / MIN_RATE - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"timed out: the answer comes slower than {MIN_RATE} bytes a "
                               "second")
        self._sock.settimeout(min(self._timeout, left))
        try:
            received = self._sock.recv_into(buffer)
        except _socket.timeout:  # Python 3.9's, not yet TimeoutError: one error for both
            raise TimeoutError("timed out") from None
        self._received += received
        return received


def _decimal(text: str) -> bool:
    """Whether TEXT is ASCII digits: `str.isdigit` says so of "²" too (a byte of the
    answer, read as latin-1), which `int` refuses."""
    return text.isascii() and text.isdigit()
