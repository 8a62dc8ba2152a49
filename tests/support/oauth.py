"""A minimal OAuth2 token issuer for the client-credentials grant (RFC 6749 4.4) on
127.0.0.1: the test double of an identity provider (Keycloak, Red Hat SSO) in front of a
Pulp that trusts its web server for authentication.

  POST /token       the client authenticated by HTTP basic (id and secret form-encoded,
                    RFC 6749 2.3.1) or by client_id/client_secret in the form;
                    grant_type=client_credentials -> {"access_token", "token_type": "Bearer",
                    "expires_in"}; a wrong client -> 401 {"error": "invalid_client"}
  GET  /introspect  for nginx's auth_request: the original request's `Authorization: Bearer
                    TOKEN` -> 200 with `X-Remote-User: <the client's user>`, else 401

Tokens are random, kept in memory with their expiry; `issued` counts them. With
`uses_per_token` set, a token stops being valid after that many requests (revoked by the
identity provider in the middle of a run).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import http.server
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import parse_qs, unquote

from tests.support.http_server import serving


@dataclass
class Issuer:
    url: str  # http://127.0.0.1:PORT
    clients: dict[str, tuple[str, str]]  # client id -> (secret, the Pulp user it acts as)
    lifetime: float = 300.0  # seconds a token lives
    tokens: dict[str, tuple[str, float]] = field(default_factory=dict)  # -> (user, expiry)
    issued: int = 0
    uses_per_token: Optional[int] = None
    uses: dict[str, int] = field(default_factory=dict)

    @property
    def token_url(self) -> str:
        return f"{self.url}/token"


def _client(headers: http.client.HTTPMessage, form: dict[str, list[str]]
            ) -> tuple[str, str] | None:
    auth = headers.get("Authorization", "")
    if auth.startswith("Basic "):
        try:
            decoded = base64.b64decode(auth[6:], validate=True).decode()
        except (ValueError, UnicodeError):
            return None
        name, _, secret = decoded.partition(":")
        return unquote(name), unquote(secret)
    if "client_id" in form and "client_secret" in form:
        return form["client_id"][0], form["client_secret"][0]
    return None


@contextlib.contextmanager
def running(clients: dict[str, tuple[str, str]], lifetime: float = 300.0) -> Iterator[Issuer]:
    issuer = Issuer("", clients, lifetime)

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self, status: int, body: dict[str, object] | None = None,
                   headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            if self.path != "/token":
                return self.answer(404, {"error": "not_found"})
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(length).decode("utf-8", "replace"))
            client = _client(self.headers, form)
            known = issuer.clients.get(client[0]) if client else None
            if client is None or known is None or not secrets.compare_digest(
                    known[0], client[1]):
                return self.answer(401, {"error": "invalid_client"},
                                   {"WWW-Authenticate": 'Basic realm="token"'})
            if form.get("grant_type") != ["client_credentials"]:
                return self.answer(400, {"error": "unsupported_grant_type"})
            token = secrets.token_urlsafe(32)
            issuer.tokens[token] = (known[1], time.monotonic() + issuer.lifetime)
            issuer.issued += 1
            return self.answer(200, {"access_token": token, "token_type": "Bearer",
                                     "expires_in": int(issuer.lifetime)})

        def do_GET(self) -> None:  # noqa: N802
            if self.path != "/introspect":
                return self.answer(404, {"error": "not_found"})
            auth = self.headers.get("Authorization", "")
            found = issuer.tokens.get(auth[7:]) if auth.startswith("Bearer ") else None
            token = auth[7:]
            issuer.uses[token] = issuer.uses.get(token, 0) + 1
            if found is None or found[1] < time.monotonic() or (
                    issuer.uses_per_token is not None
                    and issuer.uses[token] > issuer.uses_per_token):
                return self.answer(401, {"error": "invalid_token"})
            return self.answer(200, {"active": True}, {"X-Remote-User": found[0]})

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as origin:
        issuer.url = origin
        yield issuer
