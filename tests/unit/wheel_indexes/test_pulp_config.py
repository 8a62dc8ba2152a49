"""Pulp credentials the way pulp-cli finds them: its cli.toml profiles, its environment
variables; a profile is used only for the server it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from aipcc_build.errors import InputError
from aipcc_build.wheel_indexes.pulp import location
from aipcc_build.wheel_indexes.pulp_config import parse_target, server


def write(tmp_path: Path, text: str) -> dict[str, str]:
    (tmp_path / "pulp").mkdir()
    (tmp_path / "pulp" / "cli.toml").write_text(text)
    return {"XDG_CONFIG_HOME": str(tmp_path)}


def test_the_default_profile_gives_its_credentials_for_its_server(tmp_path: Path) -> None:
    env = write(tmp_path, '[cli]\nbase_url = "https://pulp.example:443"\nusername = "u"\n'
                          'password = "s3cr3t"\nverify_ssl = false\ntimeout = 30\n')
    found = server("pulp+https://pulp.example", environ=env)
    assert (found.base_url, found.username, found.password, found.verify_ssl,
            found.timeout) == ("https://pulp.example", "u", "s3cr3t", False, 30.0)
    assert "s3cr3t" not in repr(found)
    assert found.api == "/pulp/api/v3/"


def test_a_named_profile_and_the_environment(tmp_path: Path) -> None:
    env = write(tmp_path, '[cli]\nbase_url = "https://a.example"\nusername = "a"\n'
                          'password = "pa"\n[cli-b]\nbase_url = "https://b.example"\n'
                          'username = "b"\npassword = "pb"\ndomain = "public-rhai"\n')
    found = server("pulp+https://b.example", profile="b", environ=env)
    assert (found.username, found.password, found.api) == ("b", "pb",
                                                           "/pulp/public-rhai/api/v3/")
    found = server("pulp+https://b.example", environ={**env, "PULP_PROFILE": "b",
                                                      "PULP_PASSWORD": "env"})
    assert (found.username, found.password) == ("b", "env")


def test_the_password_of_one_server_is_not_sent_to_another(tmp_path: Path) -> None:
    env = write(tmp_path, '[cli]\nbase_url = "https://a.example"\nusername = "a"\n'
                          'password = "secret"\n[cli-a]\nbase_url = "https://a.example"\n')
    found = server("pulp+https://evil.example", environ=env)
    assert (found.username, found.password) == (None, None)
    with pytest.raises(InputError, match="is for https://a.example, not https://evil"):
        server("pulp+https://evil.example", profile="a", environ=env)


@pytest.mark.parametrize("text, message", [
    ('[cli\nbase_url = 1\n', "not valid TOML"),
    ('[cli]\npassword = 7\n', "password must be a string"),
    ('[cli]\nverify_ssl = "maybe"\n', "verify_ssl must be true or false"),
    ('[cli]\ntimeout = -1\n', "timeout must be a number"),
    ('cli = 3\n', r"\[cli\] is not a table"),
])
def test_a_bad_config_file_names_the_file_and_never_a_value(
        tmp_path: Path, text: str, message: str) -> None:
    env = write(tmp_path, text)
    with pytest.raises(InputError, match=message) as caught:
        server("pulp+https://a.example", environ=env)
    assert "cli.toml" in str(caught.value)


def test_a_missing_named_profile(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        server("pulp+https://a.example", profile="x", environ={"XDG_CONFIG_HOME":
                                                              str(tmp_path)})
    env = write(tmp_path, '[cli]\n')
    with pytest.raises(InputError, match=r"no \[cli-x\] profile"):
        server("pulp+https://a.example", profile="x", environ=env)


@pytest.mark.parametrize("target", [
    "https://a.example", "pulp+ftp://a.example", "pulp+https://", "pulp+https://a/x",
    "pulp+https://user:pw@a.example", "pulp+https://a.example?x=1", "-pulp+https://a",
])
def test_targets_that_are_not_a_pulp_server(target: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_target(target)
    assert "pw" not in str(caught.value).replace("pulp+https://user:pw", "")


def test_base_path_and_domain_from_the_index_url() -> None:
    url = "https://console.example/api/pypi/public-rhai/rhoai/3.0/cuda12.8-ubi9/simple/"
    assert location(url, True) == location(url, True)
    found = location(url, True)
    assert (found.domain, found.base_path) == ("public-rhai", "rhoai/3.0/cuda12.8-ubi9")
    found = location("http://127.0.0.1:1/pypi/rhoai/3.0/cpu-ubi9/simple/", False)
    assert (found.domain, found.base_path) == (None, "rhoai/3.0/cpu-ubi9")
    for bad in ("https://x/rhoai/3.0/simple/", "https://x/pypi/simple/",
                "https://x/pypi/dom/simple/"):
        with pytest.raises(InputError):
            location(bad, True)


def test_oauth2_client_credentials_from_a_profile_or_the_environment(tmp_path: Path) -> None:
    env = write(tmp_path, '[cli]\nbase_url = "https://a.example"\n[cli-ci]\nbase_url = '
                          '"https://a.example"\nclient_id = "publisher"\nclient_secret = "cs3"\n')
    found = server("pulp+https://a.example", environ={**env, "PULP_CLI_PROFILE": "ci"})
    assert (found.client_id, found.client_secret, found.username) == ("publisher", "cs3", None)
    assert "cs3" not in repr(found) and "publisher" not in repr(found)
    found = server("pulp+https://a.example", environ={
        **env, "PULP_CLIENT_ID": "other", "PULP_CLIENT_SECRET": "env-secret"})
    assert (found.client_id, found.client_secret) == ("other", "env-secret")


@pytest.mark.parametrize("text, extra, message", [
    ('[cli]\nclient_id = "x"\n', {}, "client_id without client_secret"),
    ('[cli]\n', {"PULP_CLIENT_SECRET": "s3cret"}, "client_secret without client_id"),
    ('[cli]\nclient_secret = 5\n', {}, "client_secret must be a string"),
])
def test_half_a_client_credential_is_refused_without_its_value(
        tmp_path: Path, text: str, extra: dict[str, str], message: str) -> None:
    env = write(tmp_path, text)
    with pytest.raises(InputError, match=message) as refused:
        server("pulp+https://a.example", environ={**env, **extra})
    assert "s3cret" not in str(refused.value) and "5" not in str(refused.value).split(":")[-1]
