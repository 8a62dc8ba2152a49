"""registry_http's GET against a network that fails (the build's registry check, the quick
digest look-up of promote and mirror): a reset or refused connection is `NetworkFailure`,
retried through `tools.retry`'s one backoff with the bound of a 429, as `oci_registry`'s
requests are; it failed the check at once (Unreachable) on a single reset. Past the bound
the check fails naming the host and the error, never a credential."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from aipcc_build.errors import CheckFailed
from aipcc_build.imagebuild.preflight import check_registries
from aipcc_build.tools import registry_http
from aipcc_build.tools.retry import NetworkFailure, StillFailing
from tests.unit.tools.test_oci_registry_network import FAST, SECRET, Failing, retried


def plain(server: Failing, monkeypatch: pytest.MonkeyPatch) -> Failing:
    """SERVER known to speak plain HTTP: one scheme, so a reset is not cured by trying
    the other."""
    monkeypatch.setitem(registry_http._PLAIN, server.host, ["http"])  # noqa: SLF001
    return server


def test_a_reset_get_is_a_network_failure_and_retried(servers: list[Failing],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    server = plain(Failing("reset", failures=1), monkeypatch)
    servers.append(server)
    with pytest.raises(NetworkFailure, match="reset"):
        registry_http.get(server.host, "/v2/", False, 5.0)
    assert retried(lambda: registry_http.get(server.host, "/v2/", False, 5.0)).status == 200


def test_the_digest_look_up_retries_a_reset(servers: list[Failing],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """It returned UNKNOWN (ask skopeo, a process) on a single reset."""
    server = plain(Failing("reset", failures=1), monkeypatch)
    servers.append(server)
    found = retried(lambda: registry_http.manifest_digest(
        f"docker://{server.host}/rel/img:1", tls_verify=False))
    assert found == "sha256:" + hashlib.sha256(b"ok").hexdigest()
    assert server.connections == 2


def test_the_registry_check_survives_one_reset(servers: list[Failing],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    server = plain(Failing("reset", failures=1), monkeypatch)
    servers.append(server)
    check_registries([f"{server.host}/rel/img:1"], False, {}, retry=FAST,
                     sleep=lambda s: None)
    assert server.connections == 2


def test_the_registry_check_fails_after_the_bound_naming_host_and_error(
        servers: list[Failing], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The auth file's login for it appears nowhere in the message."""
    server = plain(Failing("reset", failures=-1), monkeypatch)
    servers.append(server)
    login = base64.b64encode(SECRET.encode()).decode()
    authfile = tmp_path / "auth.json"
    authfile.write_text(json.dumps({"auths": {server.host: {"auth": login}}}))
    with pytest.raises(CheckFailed) as failed:
        check_registries([f"{server.host}/rel/img:1"], False,
                         {"REGISTRY_AUTH_FILE": str(authfile)}, retry=FAST,
                         sleep=lambda s: None)
    message = str(failed.value)
    assert server.host in message and "reset" in message.lower(), message
    assert login not in message and "hunter2" not in message
    assert server.connections == FAST.attempts


def test_a_digest_look_up_that_always_resets_fails_after_the_bound(
        servers: list[Failing], monkeypatch: pytest.MonkeyPatch) -> None:
    server = plain(Failing("reset", failures=-1), monkeypatch)
    servers.append(server)
    with pytest.raises(StillFailing) as failed:
        retried(lambda: registry_http.manifest_digest(
            f"docker://{server.host}/rel/img:1", tls_verify=False))
    assert server.host in str(failed.value) and server.connections == FAST.attempts


@pytest.mark.parametrize("failures", [-1, 1])
def test_a_login_check_the_network_fails_says_so_not_that_the_login_is_refused(
        servers: list[Failing], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        failures: int) -> None:
    """The registry asks for a login, and the connection that tries the auth file's login is
    reset: past the bound the check said the registry "does not accept the credentials", a
    false refusal of a login it never read. It fails as an unreachable registry does (exit
    1), naming the registry and the error; one reset is asked again and passes."""
    server = plain(Failing("reset", failures=failures, challenge=True), monkeypatch)
    servers.append(server)
    authfile = tmp_path / "auth.json"
    authfile.write_text(json.dumps({"auths": {server.host: {
        "auth": base64.b64encode(SECRET.encode()).decode()}}}))

    def check() -> None:
        check_registries([f"{server.host}/rel/img:1"], False,
                         {"REGISTRY_AUTH_FILE": str(authfile)}, retry=FAST,
                         sleep=lambda s: None)

    if failures > 0:
        check()
        assert server.connections == 3  # the challenge, the reset login, the login again
        return
    with pytest.raises(CheckFailed) as failed:
        check()
    message = str(failed.value)
    assert "credentials" not in message, message
    assert server.host in message and "reset" in message.lower(), message
    assert failed.value.exit_code == 1 and failed.value.field == "registry"
    assert server.connections == 1 + FAST.attempts


def test_a_token_service_that_refuses_connections_is_named_as_unreachable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Bearer challenge whose realm nothing listens at: the registry's token service is
    named as not answering, not the login as refused."""
    import http.server
    import socket

    from tests.support.http_server import serving

    closed = socket.create_server(("127.0.0.1", 0))
    realm = f"127.0.0.1:{closed.getsockname()[1]}"
    closed.close()

    class Challenging(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(401)
            self.send_header("WWW-Authenticate",
                             f'Bearer realm="http://{realm}/token",service="s"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    authfile = tmp_path / "auth.json"
    with serving(Challenging) as origin:
        host = origin.split("://", 1)[1]
        monkeypatch.setitem(registry_http._PLAIN, host, ["http"])  # noqa: SLF001
        authfile.write_text(json.dumps({"auths": {host: {"auth": "dTpw"}}}))
        with pytest.raises(CheckFailed) as failed:
            check_registries([f"{host}/rel/img:1"], False,
                             {"REGISTRY_AUTH_FILE": str(authfile)}, retry=FAST,
                             sleep=lambda s: None)
    message = str(failed.value)
    assert "credentials" not in message, message
    assert f"registry {host} (its token service {realm})" in message, message
    assert "refused" in message.lower(), message
