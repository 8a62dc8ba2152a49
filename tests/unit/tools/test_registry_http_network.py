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
