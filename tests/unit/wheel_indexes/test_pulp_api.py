"""The Pulp client against a scripted HTTP server on 127.0.0.1: timeouts, the retry policy
(a POST is never sent twice where the server may have acted), one-line errors without
credentials, task failures, streamed uploads."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from aipcc_build.tools.retry import Retry
from aipcc_build.wheel_indexes.pulp_api import Client, PulpAuthError, PulpError, PulpUnreachable
from aipcc_build.wheel_indexes.pulp_config import PulpServer
from tests.support.http_server import serving

Answer = tuple[int, dict[str, str], Any]


class Script:
    """Answers given in order; every request recorded as (method, path, body)."""

    def __init__(self) -> None:
        self.answers: list[Callable[[], Answer]] = []
        self.seen: list[tuple[str, str, bytes]] = []
        self.headers: list[dict[str, str]] = []  # of each request, in the same order

    def then(self, status: int, body: Any = None,
             headers: Optional[dict[str, str]] = None) -> Script:
        self.answers.append(lambda: (status, headers or {}, body))
        return self


@pytest.fixture
def fake() -> Iterator[tuple[Script, str]]:
    script = Script()

    class Handler(http.server.BaseHTTPRequestHandler):
        def handle_one(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            script.seen.append((self.command, self.path, self.rfile.read(length)))
            script.headers.append(dict(self.headers))
            status, headers, body = script.answers.pop(0)()
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = handle_one

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as origin:
        yield script, origin


def client(url: str, **server: Any) -> Client:
    return Client(PulpServer(base_url=url, **server), retry=Retry(attempts=3, first=0, cap=0),
                  sleep=lambda seconds: None)


def test_a_get_is_retried_on_429_and_5xx_then_answers(fake: tuple[Script, str]) -> None:
    script, url = fake
    script.then(429, headers={"Retry-After": "0"}).then(503).then(200, {"ok": 1})
    assert client(url).get("status/") == {"ok": 1}
    assert [s[1] for s in script.seen] == ["/pulp/api/v3/status/"] * 3


def test_a_get_answered_500_is_retried_as_registry_requests_are(
        fake: tuple[Script, str]) -> None:
    """One table of transient answers (tools.retry): the Pulp client had its own, without
    500."""
    script, url = fake
    script.then(500, {"detail": "database went away"}).then(200, {"ok": 1})
    assert client(url).get("status/") == {"ok": 1}
    assert len(script.seen) == 2


def test_a_post_is_not_repeated_where_pulp_may_have_acted(fake: tuple[Script, str]) -> None:
    script, url = fake
    script.then(502, {"detail": "bad gateway"})
    with pytest.raises(PulpError, match="answered 502 to POST .*modify/: bad gateway"):
        client(url).request("POST", "/pulp/api/v3/repositories/x/modify/", payload={})
    assert len(script.seen) == 1
    script.then(503).then(202, {"task": "/t/"})  # 503: refused before acting, retried
    assert client(url).request("POST", "x/", payload={}) == {"task": "/t/"}


def test_wrong_credentials_one_line_without_the_password(fake: tuple[Script, str]) -> None:
    script, url = fake
    script.then(401, {"detail": "Invalid username/password."})
    with pytest.raises(PulpAuthError) as caught:
        client(url, username="admin", password="hunter2").get("status/")
    assert "refused the credentials" in str(caught.value)
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.exit_code == 2
    script.then(401)
    with pytest.raises(PulpAuthError, match="no credentials"):
        client(url).get("status/")


def test_a_server_that_stalls_times_out(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections, never answers
    try:
        start = time.monotonic()
        with pytest.raises(PulpUnreachable, match="cannot reach Pulp"):
            client(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.1).get("x/")
        assert time.monotonic() - start < 10
    finally:
        listener.close()


def test_nothing_listening() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(PulpUnreachable, match=f"cannot reach Pulp at http://127.0.0.1:{port}"):
        client(f"http://127.0.0.1:{port}").get("status/")


def test_a_failed_task_names_it_and_its_error(fake: tuple[Script, str]) -> None:
    script, url = fake
    script.then(200, {"state": "running", "name": "modify"}).then(200, {
        "state": "failed", "name": "pulpcore.app.tasks.repository.add_and_remove",
        "error": {"description": "disk\nfull"}})
    with pytest.raises(PulpError, match="add_and_remove failed: disk full$"):
        client(url).wait("/pulp/api/v3/tasks/1/")


def test_an_upload_streams_the_file_as_multipart(fake: tuple[Script, str],
                                                 tmp_path: Path) -> None:
    script, url = fake
    wheel = tmp_path / "a-1.0-py3-none-any.whl"
    wheel.write_bytes(b"\x00" * 3_000_000)
    script.then(201, {"pulp_href": "/pulp/api/v3/content/python/packages/1/"})
    assert client(url).upload(wheel, wheel.name).endswith("/packages/1/")
    method, path, body = script.seen[0]
    assert (method, path) == ("POST", "/pulp/api/v3/content/python/packages/upload/")
    assert b'name="relative_path"\r\n\r\na-1.0-py3-none-any.whl\r\n' in body
    assert b"\x00" * 3_000_000 in body


def test_a_session_replaces_the_password_after_login(fake: tuple[Script, str]) -> None:
    script, url = fake
    script.then(201, {}, {"Set-Cookie": "sessionid=abc; Path=/"}).then(200, {})
    api = client(url, username="u", password="p")
    api.login()
    api.get("status/")
    assert script.seen[0][:2] == ("POST", "/pulp/api/v3/login/")


# ---- OAuth2 client credentials -------------------------------------------------------------

def api_document(token_url: str, scopes: Optional[dict[str, str]] = None) -> dict[str, Any]:
    return {"components": {"securitySchemes": {
        "basicAuth": {"type": "http", "scheme": "basic"},
        "remoteUserAuthentication": {"type": "oauth2", "flows": {"clientCredentials": {
            "tokenUrl": token_url, "scopes": scopes or {}}}}}}}


def oauth(url: str, **server: Any) -> Client:
    return client(url, client_id="pub lisher", client_secret="cs3cr3t", **server)


def test_a_token_from_the_documents_token_url_is_sent_as_bearer(
        fake: tuple[Script, str]) -> None:
    script, url = fake
    script.then(200, api_document(f"{url}/auth/token", {"pulp.publish": "publish"}))
    script.then(200, {"access_token": "tok-1", "token_type": "Bearer", "expires_in": 300})
    script.then(200, {"ok": 1}).then(200, {"ok": 2})
    api = oauth(url)
    assert api.get("status/") == {"ok": 1} and api.get("status/") == {"ok": 2}
    assert [s[1] for s in script.seen] == ["/pulp/api/v3/docs/api.json?component=core",
                                           "/auth/token", "/pulp/api/v3/status/",
                                           "/pulp/api/v3/status/"]
    assert "Authorization" not in script.headers[0]  # the document is read without
    # RFC 6749 2.3.1: the client's id and secret form-encoded, then HTTP basic.
    assert script.headers[1]["Authorization"] == "Basic " + base64.b64encode(
        b"pub%20lisher:cs3cr3t").decode()
    assert script.seen[1][2] == b"grant_type=client_credentials&scope=pulp.publish"
    assert [h["Authorization"] for h in script.headers[2:]] == ["Bearer tok-1"] * 2


def test_a_token_is_renewed_once_on_401_and_before_it_expires(
        fake: tuple[Script, str], monkeypatch: pytest.MonkeyPatch) -> None:
    script, url = fake
    now = [1000.0]
    monkeypatch.setattr("aipcc_build.wheel_indexes.pulp_api.time.monotonic", lambda: now[0])
    script.then(200, api_document("/auth/token"))  # relative: to the server
    for number in (1, 2, 3):
        script.then(200, {"access_token": f"tok-{number}", "token_type": "bearer",
                          "expires_in": 100})
        script.then(401 if number == 1 else 200, {"ok": number})
    api = oauth(url)
    assert api.request("POST", "repositories/", payload={}) == {"ok": 2}  # sent again
    now[0] += 95  # past 90 % of the token's life
    assert api.get("status/") == {"ok": 3}
    tokens = [h["Authorization"] for method, h in zip(script.seen, script.headers)
              if method[1].startswith("/pulp/api/v3/") and "docs" not in method[1]]
    assert tokens == ["Bearer tok-1", "Bearer tok-2", "Bearer tok-3"]


def test_a_token_the_server_keeps_refusing_is_one_line_without_secrets(
        fake: tuple[Script, str]) -> None:
    script, url = fake
    script.then(200, api_document("/auth/token"))
    for _ in range(2):
        script.then(200, {"access_token": "tok-secret", "token_type": "Bearer"})
        script.then(401)
    with pytest.raises(PulpAuthError) as refused:
        oauth(url).get("status/")
    message = str(refused.value)
    assert "refused the bearer token fetched with the client credentials" in message
    assert "tok-secret" not in message and "cs3cr3t" not in message
    assert len(script.seen) == 5 and refused.value.exit_code == 2


@pytest.mark.parametrize("status, body, shown", [
    (401, {"error": "invalid_client", "error_description": "cs3cr3t is wrong"},
     "(invalid_client)"),
    (400, {"error": "unauthorized_client\nInjected: line"}, "(400)"),
    (403, "not json", "(403)"),
])
def test_a_wrong_client_secret_is_one_line_naming_the_issuer(
        fake: tuple[Script, str], status: int, body: Any, shown: str) -> None:
    script, url = fake
    script.then(200, api_document(f"{url}/auth/token")).then(status, body)
    with pytest.raises(PulpAuthError) as refused:
        oauth(url).get("status/")
    message = str(refused.value)
    assert message == (f"the OAuth2 token issuer at {url}/auth/token refused the client "
                       "credentials of the pulp-cli profile or PULP_CLIENT_ID/"
                       f"PULP_CLIENT_SECRET {shown}")
    assert [s[1] for s in script.seen][-1] == "/auth/token"  # nothing sent to Pulp


@pytest.mark.parametrize("grant", [
    {"token_type": "Bearer"}, {"access_token": "t", "token_type": "mac"},
    {"access_token": "t\r\nX-Injected: 1", "token_type": "Bearer"}, ["not", "an", "object"],
])
def test_a_token_answer_without_a_bearer_token_is_refused(
        fake: tuple[Script, str], grant: Any) -> None:
    script, url = fake
    script.then(200, api_document("/auth/token")).then(200, grant)
    with pytest.raises(PulpAuthError, match="answered without a bearer token"):
        oauth(url).get("status/")


def test_a_server_without_an_oauth2_flow_gets_the_password_or_a_clear_error(
        fake: tuple[Script, str]) -> None:
    script, url = fake
    plain = {"components": {"securitySchemes": {"basicAuth": {"type": "http",
                                                               "scheme": "basic"}}}}
    script.then(200, plain).then(200, {"ok": 1})
    assert oauth(url, username="u", password="p").get("status/") == {"ok": 1}
    assert script.headers[1]["Authorization"].startswith("Basic ")
    script.then(200, plain)
    with pytest.raises(PulpAuthError, match="offers no OAuth2 client credentials flow"):
        oauth(url).get("status/")
    script.then(401)
    with pytest.raises(PulpAuthError, match="does not show its API document"):
        oauth(url).get("status/")


def test_an_unreachable_token_issuer_names_it(fake: tuple[Script, str]) -> None:
    script, url = fake
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script.then(200, api_document(f"http://127.0.0.1:{port}/token"))
    with pytest.raises(PulpUnreachable, match=f"cannot reach the OAuth2 token issuer at "
                                              f"http://127.0.0.1:{port}/token"):
        oauth(url).get("status/")


def test_an_https_server_naming_a_plain_http_token_url_gets_no_secret() -> None:
    api = Client(PulpServer(base_url="https://pulp.example", client_id="c", client_secret="s"))
    answer = json.dumps(api_document("http://sso.example/token")).encode()
    api._attempts = lambda *args, **kwargs: _FakeAnswer(200, answer)  # type: ignore[method-assign]
    with pytest.raises(PulpAuthError, match="names a token URL without TLS "
                                            r"\(http://sso.example\)"):
        api.login()


class _FakeAnswer:
    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body, self.headers = status, body, {}


def test_a_token_issuer_answering_429_is_asked_again_after_its_retry_after(
        fake: tuple[Script, str]) -> None:
    script, url = fake
    waits: list[float] = []
    api = Client(PulpServer(base_url=url, client_id="c", client_secret="s"),
                 retry=Retry(attempts=3, first=0, cap=0), sleep=waits.append)
    script.then(200, api_document("/auth/token"))
    script.then(429, {"error": "slow_down"}, headers={"Retry-After": "2"})
    script.then(200, {"access_token": "tok", "token_type": "Bearer"}).then(200, {"ok": 1})
    assert api.get("status/") == {"ok": 1}
    assert waits == [2.0]
    assert [s[1] for s in script.seen].count("/auth/token") == 2


def test_a_token_issuer_that_stalls_is_named_within_the_timeout(
        fake: tuple[Script, str]) -> None:
    script, url = fake
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections, never answers
        port = silent.getsockname()[1]
        script.then(200, api_document(f"http://127.0.0.1:{port}/token"))
        start = time.monotonic()
        with pytest.raises(PulpUnreachable, match=f"the OAuth2 token issuer at "
                                                  f"http://127.0.0.1:{port}/token"):
            oauth(url, timeout=0.3).get("status/")
        assert time.monotonic() - start < 10


def test_a_client_secret_with_a_newline_cannot_add_a_header(fake: tuple[Script, str]) -> None:
    script, url = fake
    script.then(200, api_document("/auth/token"))
    script.then(200, {"access_token": "tok", "token_type": "Bearer"}).then(200, {"ok": 1})
    api = client(url, client_id="-id", client_secret="s\r\nX-Injected: 1")
    assert api.get("status/") == {"ok": 1}
    assert "X-Injected" not in script.headers[1]
    assert script.headers[1]["Authorization"] == "Basic " + base64.b64encode(
        b"-id:s%0D%0AX-Injected%3A%201").decode()
