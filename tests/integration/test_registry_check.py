"""The check before a pushing run against a real docker-registry that asks for a Bearer
token (as quay.io and Docker Hub do): the credentials of the auth file are tried at the
realm the registry's challenge names, and a realm that refuses them stops the run."""

from __future__ import annotations

import base64
import http.server
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from aipcc_build.errors import CheckFailed
from aipcc_build.imagebuild.preflight import check_registries
from tests.support.http_server import serving
from tests.support.registry import Registry

pytestmark = pytest.mark.skipif(
    shutil.which("docker-registry") is None or shutil.which("openssl") is None,
    reason="docker-registry and openssl are needed")

RIGHT = "Basic " + base64.b64encode(b"robot:right").decode()


@pytest.fixture
def realm() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A token service: a token for robot:right, 401 for anything else; each request's
    query and Authorization recorded."""
    asked: list[dict[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            given = self.headers.get("Authorization", "")
            asked.append({"path": self.path, "authorization": given})
            body = json.dumps({"token": "t"}).encode() if given == RIGHT else b""
            self.send_response(200 if given == RIGHT else 401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as origin:
        yield f"{origin}/token", asked


def test_a_bearer_realm_is_asked_with_the_auth_files_login(
        tmp_path: Path, realm: tuple[str, list[dict[str, str]]]) -> None:
    url, asked = realm
    certs = tmp_path / "token-signing.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=test-issuer", "-keyout", str(tmp_path / "key.pem"),
                    "-out", str(certs)], check=True, capture_output=True, timeout=60)
    (tmp_path / "reg").mkdir()
    registry = Registry(tmp_path / "reg", token_realm=url, token_certs=certs)
    registry.start()
    auth_file = tmp_path / "auth.json"

    def check(login: bytes) -> None:
        auth_file.write_text(json.dumps({"auths": {registry.host: {
            "auth": base64.b64encode(login).decode()}}}))
        check_registries([f"{registry.host}/ns/image:1"], tls_verify=False,
                         environ={"REGISTRY_AUTH_FILE": str(auth_file)}, timeout=5)

    try:
        check(b"robot:right")
        assert asked[-1]["authorization"] == RIGHT
        assert "service=test-registry" in asked[-1]["path"]  # from the registry's challenge
        with pytest.raises(CheckFailed, match=f"registry {registry.host} does not accept the "
                                              "credentials"):
            check(b"robot:wrong")
        assert len(asked) == 2
    finally:
        registry.stop()
