"""The client-certificate helper in a real `buildah build` under chroot isolation (the
project's own setting), where a RUN step's /dev/shm is the build host's: pip installs from
an HTTPS index on 127.0.0.1 that refuses a connection without the entitlement's client
certificate, and afterwards neither the host's /dev/shm nor the image holds the key, after a
pip that succeeded, one that failed and one killed by a signal."""

from __future__ import annotations

import hashlib
import http.server
import os
import ssl
import subprocess
import uuid
from pathlib import Path

import pytest

from aipcc_build.render.containerfiles import FILES_DIR, image_files, staged_name, tool_config
from aipcc_build.toolkit.constraints import target_of
from tests.support.certs import ENTITLEMENT_ID, certificates
from tests.support.http_server import serving
from tests.support.wheels import make_wheel

pytestmark = pytest.mark.integration


def index_handler(wheel: Path) -> type[http.server.BaseHTTPRequestHandler]:
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.rstrip("/") == "/simple/cpu-lib":
                kind = "text/html"
                body = f'<a href="/files/{wheel.name}#sha256={digest}">{wheel.name}</a>'.encode()
            elif self.path == f"/files/{wheel.name}":
                kind, body = "application/octet-stream", wheel.read_bytes()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Index


def files_holding(text: str, top: str) -> list[str]:
    found = []
    for directory, _, names in os.walk(top):
        for name in names:
            path = os.path.join(directory, name)
            try:
                with open(path, "rb") as handle:
                    if text.encode() in handle.read(1 << 20):
                        found.append(path)
            except OSError:
                continue
    return found


def test_the_combined_key_stays_on_no_host_file_under_chroot_isolation(
        tmp_path: Path, debian_base: str) -> None:
    certs = tmp_path / "certs"
    certificates(certs)
    entitlement = tmp_path / "entitlement"
    entitlement.mkdir()
    (entitlement / f"{ENTITLEMENT_ID}.pem").write_bytes((certs / "client.pem").read_bytes())
    key = (certs / "client-key.pem").read_text()
    (entitlement / f"{ENTITLEMENT_ID}-key.pem").write_text(key)
    key_line = key.splitlines()[1]
    wheel = make_wheel(tmp_path / "wheels", "cpu-lib", "1.0",
                       files={"cpu_lib/__init__.py": b"VALUE = 1\n"})

    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(str(certs / "server.pem"), str(certs / "server-key.pem"))
    tls.load_verify_locations(str(certs / "ca.pem"))
    tls.verify_mode = ssl.CERT_REQUIRED  # no client certificate, no index
    tag = f"localhost/aipcc-test/index-cert-{uuid.uuid4().hex[:8]}"
    container = ""
    shm_before = set(os.listdir("/dev/shm"))
    try:
        with serving(index_handler(wheel), tls) as origin:
            (tmp_path / FILES_DIR).mkdir()
            for path, text in image_files(f"{origin}/simple/", target_of("cpu", None),
                                          "client-cert").items():
                (tmp_path / FILES_DIR / staged_name(path)).write_text(text)
            (tmp_path / "Containerfile").write_text("\n".join([
                f"FROM {debian_base}",
                "ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 "
                "PIP_PYTHON=/opt/venv/bin/python PIP_CERT=/test-ca/ca.pem",
                "RUN python3 -m venv --without-pip /opt/venv",
                tool_config(f"{origin}/simple/", target_of("cpu", None), "client-cert"),
                # Succeeds only with the certificate presented.
                "RUN pip install cpu-lib && /opt/venv/bin/python -c 'import cpu_lib'",
                # A pip that fails, and one ended by SIGKILL mid-run.
                "RUN ! pip install no-such-project",
                "RUN (pip download -d /tmp/d cpu-lib & sleep 0.5; kill -9 $!; wait) || true",
                "",
            ]))
            built = subprocess.run(
                ["buildah", "build", "--isolation", "chroot", "--pull-never", "-t", tag,
                 f"--volume={entitlement}:/etc/pki/entitlement:ro",
                 f"--volume={certs}:/test-ca:ro", "-f", str(tmp_path / "Containerfile"),
                 str(tmp_path)],
                capture_output=True, text=True, timeout=600)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        assert "Successfully installed cpu-lib-1.0" in built.stdout
        # The host's /dev/shm (the RUN steps' own) holds no key and nothing of the helper.
        assert files_holding(key_line, "/dev/shm") == []
        assert not [n for n in set(os.listdir("/dev/shm")) - shm_before if "aipcc" in n]
        # Nor does the image.
        container = subprocess.run(["buildah", "from", "--pull-never", tag], check=True,
                                   capture_output=True, text=True, timeout=300).stdout.strip()
        found = subprocess.run(["buildah", "run", "--isolation", "chroot", container, "--",
                                "grep", "-rlF", key_line, "/etc", "/opt", "/usr", "/root",
                                "/tmp", "/var", "/run"],
                               capture_output=True, text=True, timeout=300)
        assert found.stdout.strip() == "", found.stdout
    finally:
        if container:
            subprocess.run(["buildah", "rm", container], capture_output=True, timeout=300)
        subprocess.run(["buildah", "rmi", "-f", tag], capture_output=True, timeout=300)
