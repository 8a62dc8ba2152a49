"""The Pulp client against a scripted HTTP server on 127.0.0.1: timeouts, the retry policy
(a POST is never sent twice where the server may have acted), one-line errors without
credentials, task failures, streamed uploads."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from aipcc_build.publish.pulp_api import Client, PulpAuthError, PulpError, PulpUnreachable
from aipcc_build.publish.pulp_config import PulpServer
from aipcc_build.publish.transfer import Retry

Answer = tuple[int, dict[str, str], Any]


class Script:
    """Answers given in order; every request recorded as (method, path, body)."""

    def __init__(self) -> None:
        self.answers: list[Callable[[], Answer]] = []
        self.seen: list[tuple[str, str, bytes]] = []

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

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield script, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def client(url: str, **server: Any) -> Client:
    return Client(PulpServer(base_url=url, **server), retry=Retry(attempts=3, first=0, cap=0),
                  sleep=lambda seconds: None)


def test_a_get_is_retried_on_429_and_5xx_then_answers(fake: tuple[Script, str]) -> None:
    script, url = fake
    script.then(429, headers={"Retry-After": "0"}).then(503).then(200, {"ok": 1})
    assert client(url).get("status/") == {"ok": 1}
    assert [s[1] for s in script.seen] == ["/pulp/api/v3/status/"] * 3


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
            client(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.3).get("x/")
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
