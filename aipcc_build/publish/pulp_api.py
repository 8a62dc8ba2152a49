"""A small client of Pulp's REST API (pulpcore + pulp_python): JSON requests with a timeout,
streamed multipart uploads, task waiting, one retry policy.

Every request has a timeout (the server's `timeout`, pulp-cli's setting). Transient answers
(a connection that fails, 429, 502, 503, 504) are retried with the project's backoff, in
`_attempts` only; a POST is retried only where the server cannot have acted on it (the
connection was refused, or it answered 429/503), so one modify never makes two versions.
Errors are one line naming the server and what failed, never a credential.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import json
import os
import socket
import ssl
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Callable, Optional
from urllib.parse import urlencode, urlsplit

from ..errors import AipccError
from .pulp_config import PulpServer
from .transfer import Retry

TASK_TIMEOUT = 1800.0  # seconds a Pulp task may take before we give up waiting
_TRANSIENT_STATUS = {429, 502, 503, 504}
_NOT_ACTED_STATUS = {429, 503}
_CHUNK = 1 << 20


class PulpError(AipccError):
    """Pulp answered with an error, or a task failed: nothing was switched (exit 1)."""

    exit_code = 1


class PulpAuthError(PulpError):
    """Pulp refused the credentials (exit 2: fix the configuration)."""

    exit_code = 2


class PulpUnreachable(PulpError):
    """No answer from the server (exit 1)."""


class _Answer:
    def __init__(self, status: int, headers: Mapping[str, str], body: bytes,
                 cookies: Sequence[tuple[str, str]] = ()) -> None:
        self.status, self.headers, self.body = status, headers, body
        self.cookies = cookies

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@functools.lru_cache(maxsize=8)
def _context(verify: bool, cert: Optional[str], key: Optional[str]) -> ssl.SSLContext:
    context = ssl.create_default_context() if verify else ssl.SSLContext(
        ssl.PROTOCOL_TLS_CLIENT)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert:
        context.load_cert_chain(cert, key)
    return context


def _detail(body: bytes) -> str:
    """Pulp's error text on one line, short."""
    try:
        data = json.loads(body)
        text = json.dumps(data, separators=(",", ":")) if not isinstance(data, dict) or \
            "detail" not in data else str(data["detail"])
    except ValueError:
        text = body.decode("utf-8", "replace")
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "")


class Client:
    """Requests to one Pulp server. PATH arguments are API paths ("repositories/...") or
    the hrefs Pulp returns ("/pulp/api/v3/...")."""

    def __init__(self, server: PulpServer, retry: Optional[Retry] = None,
                 sleep: Callable[[float], None] = time.sleep, label: str = "Pulp") -> None:
        self.server = server
        self.label = label  # what errors call the server: "Pulp", "the index source"
        self.retry = retry or Retry()
        self.sleep = sleep
        parts = urlsplit(server.base_url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._basic: dict[str, str] = {}
        if server.username is not None and server.password is not None:
            token = base64.b64encode(f"{server.username}:{server.password}".encode())
            self._basic = {"Authorization": "Basic " + token.decode()}
        self._auth = self._basic
        self._session: Optional[dict[str, str]] = None  # cookies of a login/ session

    def login(self) -> None:
        """Trade the password for a session once: Pulp checks a password with a slow hash
        (~0.7 s a request), a session cookie costs nothing. A Pulp without login/ keeps
        the password on every request."""
        if not self._basic or self._session is not None:
            return
        url = self._url("login/")
        answer = self._attempts("POST", url, lambda: None, {"Accept": "application/json"})
        if answer.status == 404:
            self._session = {}
            return
        self._check("POST", url, answer, (200, 201))
        cookies = {}
        for name, value in answer.cookies:
            cookies[name] = value
        if "sessionid" not in cookies:
            self._session = {}
            return
        self._session = cookies
        self._auth = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())}

    def logout(self) -> None:
        if self._session:
            # (A logout that fails leaves a session that expires by itself.)
            with contextlib.suppress(OSError, http.client.HTTPException):
                self._once("DELETE", self._url("login/"), None, self._unsafe_headers("DELETE"))
            self._session = None
            self._auth = self._basic

    def _unsafe_headers(self, method: str) -> dict[str, str]:
        """Django's CSRF check wants the token (and, over HTTPS, a same-origin Referer) on
        a request that changes something in a session."""
        if not self._session or method in ("GET", "HEAD") or "csrftoken" not in self._session:
            return {}
        return {"X-CSRFToken": self._session["csrftoken"],
                "Referer": self.server.base_url + "/"}

    def __enter__(self) -> Client:
        self.login()
        return self

    def __exit__(self, *exc: object) -> None:
        self.logout()

    # ---- one HTTP exchange ---------------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=self.server.timeout,
                context=_context(self.server.verify_ssl, self.server.cert, self.server.key))
        return http.client.HTTPConnection(self._host, self._port, timeout=self.server.timeout)

    def _url(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        if path.startswith(("http://", "https://")):
            parts = urlsplit(path)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
        elif not path.startswith("/"):
            path = self.server.api + path
        if query:
            path += ("&" if "?" in path else "?") + urlencode(query)
        return path

    def _once(self, method: str, url: str, body: Any, headers: Mapping[str, str],
              sink: Optional[Callable[[], BinaryIO]] = None) -> _Answer:
        connection = self._connection()
        try:
            connection.request(method, url, body=body, headers={
                **self._auth, **self._unsafe_headers(method), **headers})
            answer = connection.getresponse()
            cookies = [cookie.split(";", 1)[0].strip().partition("=")
                       for name, cookie in answer.getheaders() if name.lower() == "set-cookie"]
            if sink is not None and answer.status == 200:
                with sink() as out:  # a large file goes to disk, not to memory
                    while True:
                        chunk = answer.read(_CHUNK)
                        if not chunk:
                            break
                        out.write(chunk)
                data = b""
            else:
                data = answer.read()
            return _Answer(answer.status, dict(answer.getheaders()), data,
                           [(n, v) for n, _, v in cookies])
        finally:
            connection.close()

    def _attempts(self, method: str, url: str, make_body: Callable[[], Any],
                  headers: Mapping[str, str],
                  sink: Optional[Callable[[], BinaryIO]] = None) -> _Answer:
        """The one retry loop: transient failures again after the backoff's wait."""
        what = f"{method} {self.server.base_url}{url.split('?')[0]}"
        attempt = 0
        while True:
            attempt += 1
            last = attempt >= self.retry.attempts
            try:
                answer = self._once(method, url, make_body(), headers, sink)
            except ssl.SSLError as exc:
                raise PulpUnreachable(f"TLS with {self.server.base_url} failed: "
                                      f"{exc.reason or exc}") from None
            except (OSError, http.client.HTTPException) as exc:
                refused = isinstance(exc, (ConnectionRefusedError, socket.gaierror))
                if last or (method == "POST" and not refused):
                    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror \
                        else type(exc).__name__ if not str(exc) else str(exc)
                    raise PulpUnreachable(f"cannot reach {self.label} at {self.server.base_url}: "
                                          f"{reason} ({what})") from None
                self.sleep(self.retry.delay(attempt))
                continue
            retryable = _NOT_ACTED_STATUS if method == "POST" else _TRANSIENT_STATUS
            if answer.status in retryable and not last:
                wait = self.retry.delay(attempt)
                after = answer.headers.get("Retry-After", "")
                if after.isdigit():
                    wait = min(float(after), self.retry.cap)
                self.sleep(wait)
                continue
            return answer

    def request(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                payload: Any = None, ok: tuple[int, ...] = (200, 201, 202, 204),
                raw: bool = False) -> Any:
        """The answer's JSON; with RAW, its text (an HTML page)."""
        url = self._url(path, query)
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"Accept": "text/html" if raw else "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        answer = self._attempts(method, url, lambda: data, headers)
        self._check(method, url, answer, ok)
        return answer.body.decode("utf-8", "replace") if raw else answer.json()

    def _check(self, method: str, url: str, answer: _Answer, ok: tuple[int, ...]) -> None:
        if answer.status in ok:
            return
        where = f"{self.server.base_url}{url.split('?')[0]}"
        if answer.status == 401:
            how = "the credentials of the pulp-cli profile or PULP_USERNAME/PULP_PASSWORD" \
                if self._basic else "no credentials (set them in pulp-cli's cli.toml or " \
                                   "PULP_USERNAME/PULP_PASSWORD)"
            raise PulpAuthError(f"Pulp at {self.server.base_url} refused {how} (401)")
        if answer.status == 403:
            raise PulpAuthError(f"Pulp at {self.server.base_url}: the user may not "
                                f"{method} {url.split('?')[0]} (403)")
        raise PulpError(f"{self.label} answered {answer.status} to {method} {where}: "
                        f"{_detail(answer.body)}")

    # ---- conveniences ----------------------------------------------------------------------

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query or None)

    def all(self, path: str, **query: Any) -> list[Any]:
        """Every result of a paginated list."""
        found: list[Any] = []
        page = self.get(path, limit=1000, **query)
        while True:
            found.extend(page["results"])
            if not page.get("next"):
                return found
            page = self.request("GET", page["next"])

    def wait(self, task_href: str, timeout: float = TASK_TIMEOUT) -> dict[str, Any]:
        """The finished task; PulpError when it failed or was canceled."""
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            task = self.request("GET", task_href)
            state = task.get("state")
            if state == "completed":
                return dict(task)
            if state in ("failed", "canceled", "skipped"):
                error = task.get("error") or {}
                reason = error.get("description") if isinstance(error, dict) else None
                raise PulpError(f"Pulp task {task.get('name', task_href)} {state}"
                                + (f": {' '.join(str(reason).split())[:300]}" if reason
                                   else ""))
            if time.monotonic() > deadline:
                raise PulpError(f"Pulp task {task.get('name', task_href)} did not finish "
                                f"in {timeout:.0f} s (state {state})")
            self.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def run(self, method: str, path: str, payload: Any = None) -> dict[str, Any]:
        """A request answered with a task (202), waited for."""
        answer = self.request(method, path, payload=payload)
        return self.wait(answer["task"])

    def download(self, path: str, destination: Path) -> None:
        """GET PATH (of this server) into DESTINATION, streamed (rewritten on a retry)."""
        url = self._url(path)
        answer = self._attempts("GET", url, lambda: None, {},
                                sink=lambda: destination.open("wb"))
        self._check("GET", url, answer, (200,))

    def upload(self, path: Path, filename: str) -> str:
        """Upload one wheel (streamed, multipart); the href of its content unit."""
        boundary = uuid.uuid4().hex
        head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"relative_path\"\r\n"
                f"\r\n{filename}\r\n--{boundary}\r\nContent-Disposition: form-data; "
                f"name=\"file\"; filename=\"{filename}\"\r\nContent-Type: "
                "application/octet-stream\r\n\r\n").encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        size = os.stat(path).st_size

        def body() -> Iterator[bytes]:
            yield head
            with open(path, "rb") as handle:
                while True:
                    chunk = handle.read(_CHUNK)
                    if not chunk:
                        break
                    yield chunk
            yield tail

        headers = {"Accept": "application/json",
                   "Content-Type": f"multipart/form-data; boundary={boundary}",
                   "Content-Length": str(len(head) + size + len(tail))}
        url = self._url("content/python/packages/upload/")
        answer = self._attempts("POST", url, body, headers)
        if answer.status == 404:  # a pulp_python without the synchronous upload
            url = self._url("content/python/packages/")
            answer = self._attempts("POST", url, body, headers)
            self._check("POST", url, answer, (202,))
            task = self.wait(answer.json()["task"])
            return str(task["created_resources"][0])
        self._check("POST", url, answer, (201,))
        return str(answer.json()["pulp_href"])
