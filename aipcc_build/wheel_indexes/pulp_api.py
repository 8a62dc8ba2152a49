"""A small client of Pulp's REST API (pulpcore + pulp_python): JSON requests with a timeout,
streamed multipart uploads, task waiting, one retry policy.

Every request has a timeout (the server's `timeout`, pulp-cli's setting). Transient failures
(a connection that fails; the answers `tools.retry` calls transient) are retried with the
project's backoff, in `_attempts` only; a POST is retried only where the server cannot have
acted on it (the connection was refused, or an answer in `NOT_ACTED_STATUS`), so one modify
never makes two versions.
Errors are one line naming the server and what failed, never a credential.

With OAuth2 client credentials (pulp-cli's client_id/client_secret) the client does what
pulp-glue does: it reads the token URL from the client-credentials flow of an `oauth2`
security scheme in the server's API document, fetches a token with the client_credentials
grant (RFC 6749 4.4, the client authenticated by HTTP basic), sends it as `Bearer`, and
fetches a new one when it is about to expire or once when the server answers 401. The token
lives in memory only.
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
from typing import Any, BinaryIO, Callable, NamedTuple, Optional
from urllib.parse import quote, urlencode, urljoin, urlsplit

from ..errors import AipccError
from ..tools.retry import NOT_ACTED_STATUS, Retry, parse_retry_after, transient_status
from .pulp_config import PulpServer

TASK_TIMEOUT = 1800.0  # seconds a Pulp task may take before we give up waiting
_CHUNK = 1 << 20
# The API document of pulpcore alone (its plugins' paths make the whole one slow to build):
# the security schemes are the same.
API_DOCUMENT = "docs/api.json?component=core"
TOKEN_MARGIN = 0.1  # of a token's lifetime: fetch a new one this long before it expires
_OAUTH_ERROR = frozenset("abcdefghijklmnopqrstuvwxyz_")  # RFC 6749's error codes


class PulpError(AipccError):
    """Pulp answered with an error, or a task failed: nothing was switched (exit 1)."""

    exit_code = 1


class PulpAuthError(PulpError):
    """Pulp refused the credentials (exit 2: fix the configuration)."""

    exit_code = 2


class PulpUnreachable(PulpError):
    """No answer from the server (exit 1)."""


class NotPulpAPI(PulpError):
    """The server answered, but not with Pulp's JSON (a web page, a proxy's login form):
    the URL is not a Pulp API (exit 2: fix the URL)."""

    exit_code = 2


class _Origin(NamedTuple):
    """Where a request goes: the Pulp server, or the OAuth2 token issuer."""

    https: bool
    host: str
    port: Optional[int]

    @classmethod
    def of(cls, url: str) -> _Origin:
        parts = urlsplit(url)
        return cls(parts.scheme == "https", parts.hostname or "", parts.port)

    def __str__(self) -> str:
        port = f":{self.port}" if self.port else ""
        return f"{'https' if self.https else 'http'}://{self.host}{port}"


class _Answer:
    def __init__(self, status: int, headers: Mapping[str, str], body: bytes,
                 cookies: Sequence[tuple[str, str]] = ()) -> None:
        self.status, self.headers, self.body = status, headers, body
        self.cookies = cookies

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode())
            .decode()}


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
        self._origin = _Origin.of(server.base_url)
        self._basic: dict[str, str] = {}
        if server.username is not None and server.password is not None:
            self._basic = _basic(server.username, server.password)
        self._auth = self._basic
        self._session: Optional[dict[str, str]] = None  # cookies of a login/ session
        # OAuth2: None until the API document was read; then the token URL and scopes of
        # its client-credentials flow, or () when it offers none.
        self._flow: Optional[tuple[str, str] | tuple[()]] = None
        self._token_expires = 0.0  # time.monotonic() after which a new token is fetched

    def login(self) -> None:
        """Trade the password for a session once: Pulp checks a password with a slow hash
        (~0.7 s a request), a session cookie costs nothing. A Pulp without login/ keeps
        the password on every request. With client credentials, fetch the first token."""
        if self._oauth:
            self._bearer()
            return
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

    # ---- OAuth2 client credentials -------------------------------------------------------

    @property
    def _oauth(self) -> bool:
        return self.server.client_id is not None and self._flow != ()

    def _bearer(self, renew: bool = False) -> None:
        """Make sure self._auth carries a token that is not about to expire."""
        if not renew and self._auth and time.monotonic() < self._token_expires:
            return
        if self._flow is None:
            self._flow = self._client_credentials_flow()
            if self._flow == ():
                self._auth = self._basic  # pulp-glue too falls back to the password
                return
        assert self._flow
        token_url, scope = self._flow
        assert self.server.client_id is not None and self.server.client_secret is not None
        form = {"grant_type": "client_credentials", **({"scope": scope} if scope else {})}
        body = urlencode(form).encode()
        origin = _Origin.of(token_url)
        parts = urlsplit(token_url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        issuer = f"{origin}{parts.path}"
        # RFC 6749 2.3.1: id and secret are form-encoded before they are joined.
        headers = {**_basic(quote(self.server.client_id, safe=""),
                            quote(self.server.client_secret, safe="")),
                   "Content-Type": "application/x-www-form-urlencoded",
                   "Accept": "application/json"}
        started = time.monotonic()
        answer = self._attempts("POST", path, lambda: body, headers, origin=origin,
                                idempotent=True, authenticate=False, label=f"the OAuth2 "
                                f"token issuer at {issuer}")
        whose = "the client credentials of the pulp-cli profile or PULP_CLIENT_ID/" \
                "PULP_CLIENT_SECRET"
        if answer.status in (400, 401, 403):
            try:
                code = str(json.loads(answer.body).get("error", ""))
            except (ValueError, AttributeError):
                code = ""
            code = code if code and set(code) <= _OAUTH_ERROR else str(answer.status)
            raise PulpAuthError(f"the OAuth2 token issuer at {issuer} refused {whose} "
                                f"({code})")
        if answer.status != 200:
            raise PulpError(f"the OAuth2 token issuer at {issuer} answered {answer.status} "
                            f"to the token request for {whose}")
        try:
            grant = json.loads(answer.body)
            token, kind = grant["access_token"], grant.get("token_type", "")
            lifetime = float(grant.get("expires_in") or 0)
        except (ValueError, KeyError, TypeError, AttributeError):
            grant, token, kind, lifetime = None, None, "", 0.0
        if not isinstance(token, str) or not token or str(kind).lower() != "bearer" \
                or any(c in token for c in "\r\n"):
            raise PulpAuthError(f"the OAuth2 token issuer at {issuer} answered without a "
                                "bearer token")
        self._auth = {"Authorization": f"Bearer {token}"}
        # No lifetime given: keep it until the server answers 401.
        self._token_expires = started + lifetime * (1 - TOKEN_MARGIN) if lifetime > 0 \
            else float("inf")

    def _client_credentials_flow(self) -> tuple[str, str] | tuple[()]:
        """(token URL, scopes) of the first oauth2 security scheme of the server's API
        document with a client-credentials flow; () when there is none."""
        url = self._url(API_DOCUMENT)
        answer = self._attempts("GET", url, lambda: None, {"Accept": "application/json"},
                                authenticate=False)
        if answer.status in (401, 403):
            raise PulpAuthError(f"Pulp at {self.server.base_url} does not show its API "
                                f"document ({url.split('?')[0]}) without credentials: the token "
                                "URL for the OAuth2 client credentials is not known")
        self._check("GET", url, answer, (200,))
        try:
            schemes = json.loads(answer.body)["components"]["securitySchemes"]
            flows = [scheme["flows"]["clientCredentials"] for scheme in schemes.values()
                     if isinstance(scheme, dict) and scheme.get("type") == "oauth2"
                     and "clientCredentials" in scheme.get("flows", {})]
        except (ValueError, KeyError, TypeError, AttributeError):
            flows = []
        for flow in flows:
            if isinstance(flow, dict) and isinstance(flow.get("tokenUrl"), str):
                token_url = urljoin(self.server.base_url + self.server.api, flow["tokenUrl"])
                scheme = urlsplit(token_url).scheme
                if scheme == "http" and self._origin.https:
                    # The client secret would cross the network in clear text.
                    raise PulpAuthError(f"Pulp at {self.server.base_url} names a token URL "
                                        f"without TLS ({_Origin.of(token_url)}): the client "
                                        "secret is not sent there")
                if scheme in ("http", "https"):
                    scopes = flow.get("scopes") or {}
                    return token_url, " ".join(scopes) if isinstance(scopes, dict) else ""
        if self._basic:
            return ()
        raise PulpAuthError(f"Pulp at {self.server.base_url} offers no OAuth2 client "
                            "credentials flow (its API document names no token URL) and no "
                            "user and password are configured")

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

    def _connection(self, origin: _Origin) -> http.client.HTTPConnection:
        if origin.https:
            # The profile's client certificate goes to the Pulp server only.
            cert = (self.server.cert, self.server.key) if origin == self._origin else \
                (None, None)
            return http.client.HTTPSConnection(
                origin.host, origin.port, timeout=self.server.timeout,
                context=_context(self.server.verify_ssl, *cert))
        return http.client.HTTPConnection(origin.host, origin.port,
                                          timeout=self.server.timeout)

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
              sink: Optional[Callable[[], BinaryIO]] = None,
              origin: Optional[_Origin] = None, authenticate: bool = True) -> _Answer:
        connection = self._connection(origin or self._origin)
        auth = {**self._auth, **self._unsafe_headers(method)} if authenticate else {}
        try:
            connection.request(method, url, body=body, headers={**auth, **headers})
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
                  sink: Optional[Callable[[], BinaryIO]] = None, *,
                  origin: Optional[_Origin] = None, idempotent: bool = False,
                  authenticate: bool = True, label: Optional[str] = None) -> _Answer:
        """The one retry loop: transient failures again after the backoff's wait. A bearer
        token is renewed before it expires, and once when the server answers 401 (it did
        not act: the request is sent again)."""
        where = origin or self._origin
        what = f"{method} {where}{url.split('?')[0]}"
        unsafe = method == "POST" and not idempotent
        oauth = authenticate and self._oauth
        renewed = False
        attempt = 0
        while True:
            attempt += 1
            last = attempt >= self.retry.attempts
            if oauth:
                self._bearer()
            try:
                answer = self._once(method, url, make_body(), headers, sink, where,
                                    authenticate)
            except ssl.SSLError as exc:
                raise PulpUnreachable(f"TLS with {where} failed: "
                                      f"{exc.reason or exc}") from None
            except (OSError, http.client.HTTPException) as exc:
                refused = isinstance(exc, (ConnectionRefusedError, socket.gaierror))
                if last or (unsafe and not refused):
                    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror \
                        else type(exc).__name__ if not str(exc) else str(exc)
                    raise PulpUnreachable(f"cannot reach {label or f'{self.label} at {where}'}"
                                          f": {reason} ({what})") from None
                self.sleep(self.retry.delay(attempt))
                continue
            if answer.status == 401 and oauth and not renewed:
                renewed = True
                self._bearer(renew=True)
                attempt -= 1
                continue
            retryable = answer.status in NOT_ACTED_STATUS if unsafe \
                else transient_status(answer.status)
            if retryable and not last:
                self.sleep(self.retry.delay(attempt, parse_retry_after(
                    answer.headers.get("Retry-After"))))
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
        return answer.body.decode("utf-8", "replace") if raw else self._json(method, url,
                                                                              answer)

    def _json(self, method: str, url: str, answer: _Answer) -> Any:
        try:
            return answer.json()
        except ValueError:
            kind = answer.headers.get("Content-Type") or answer.headers.get("content-type")
            raise NotPulpAPI(f"{self.label} at {self.server.base_url} answered {method} "
                             f"{url.split('?')[0]} with {kind or 'something'} that is not "
                             "JSON: not a Pulp API server") from None

    def _check(self, method: str, url: str, answer: _Answer, ok: tuple[int, ...]) -> None:
        if answer.status in ok:
            return
        where = f"{self.server.base_url}{url.split('?')[0]}"
        if answer.status == 401:
            how = "the bearer token fetched with the client credentials of the pulp-cli " \
                "profile or PULP_CLIENT_ID/PULP_CLIENT_SECRET" if self._oauth else \
                "the credentials of the pulp-cli profile or PULP_USERNAME/PULP_PASSWORD" \
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
            task = self.wait(self._json("POST", url, answer)["task"])
            return str(task["created_resources"][0])
        self._check("POST", url, answer, (201,))
        return str(self._json("POST", url, answer)["pulp_href"])
