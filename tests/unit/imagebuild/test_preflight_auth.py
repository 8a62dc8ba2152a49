"""The build's registry check with an auth file whose login holds a line break: it went
into a header and raised ValueError (a traceback); now an InputError naming the file and
never the login (exit 2), before any build."""

from __future__ import annotations

import http.server
import json
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.errors import InputError
from aipcc_build.imagebuild.preflight import check_registries
from tests.support.http_server import serving


class WantsLogin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sent: list[str] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        WantsLogin.sent.append(str(self.headers))
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="test"')
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.mark.parametrize("login", ["c2VjcmV0\r\nX-Injected: 1", "c2VjcmV0\n", "c2Vj\x00"])
def test_a_login_that_is_no_header_value_is_an_input_error(tmp_path: Path,
                                                           login: str) -> None:
    WantsLogin.sent = []
    with serving(WantsLogin) as origin:
        host = origin.split("://", 1)[1]
        authfile = tmp_path / "auth.json"
        authfile.write_text(json.dumps({"auths": {host: {"auth": login}}}))
        with pytest.raises(InputError) as refused:
            check_registries([f"{host}/rel/img:1"], False,
                             {"REGISTRY_AUTH_FILE": str(authfile)}, timeout=5)
    assert refused.value.file == str(authfile)
    assert "c2Vj" not in str(refused.value)
    assert not any("Injected" in sent for sent in WantsLogin.sent)


def test_an_auth_file_that_is_a_fifo_is_passed_over_not_waited_on(tmp_path: Path) -> None:
    """buildah's order of auth files: a FIFO where one should be hung the check."""
    import os

    os.mkfifo(tmp_path / "auth.json")
    WantsLogin.sent = []
    with serving(WantsLogin) as origin:
        check_registries([f"{origin.split('://', 1)[1]}/rel/img:1"], False,
                         {"REGISTRY_AUTH_FILE": str(tmp_path / "auth.json")}, timeout=5)
    assert len(WantsLogin.sent) == 1  # asked, found no login to try: the push tells


def test_a_registry_host_holding_a_line_break_is_a_check_failure() -> None:
    from aipcc_build.errors import CheckFailed

    with pytest.raises(CheckFailed, match="does not answer"):
        check_registries(["registry.example\nInjected: 1/rel/img:1"], False, {}, timeout=1)
