"""Fixtures of the promote and mirror tests: registries (one asking for a login), small
images pushed with buildah, a build report of them, and a 503-answering proxy."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from support.registry import Registry

REPO = Path(__file__).resolve().parents[2]

PASSWORD = "s3cret-Pa55-" + uuid.uuid4().hex[:8]
USER = "releaser"

MATRIX = """\
schema: 1
product: {{name: aipcc, version: "3.0", moving_tags: ["{{version}}", "latest"]}}
registry: {registry}
templates: templates
output: out
os:
  el9: {{from: localhost/base:1}}
accelerators:
  cpu: {{}}
images:
  base:
    template: base.j2
    repository: "{{registry}}/base-images/{{name}}"
    os: [el9]
"""


def make_registry(root: Path, htpasswd: Path | None = None) -> Registry:
    if shutil.which("docker-registry") is None:
        pytest.fail("docker-registry is not installed: run the README's test command")
    root.mkdir(parents=True)
    reg = Registry(root, htpasswd)
    reg.start()
    return reg


@pytest.fixture
def registries(tmp_path: Path) -> Iterator[dict[str, Registry]]:
    """`src` (open) and `dst` (htpasswd: USER / PASSWORD)."""
    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(5)).decode()}\n")
    regs = {"src": make_registry(tmp_path / "src"),
            "dst": make_registry(tmp_path / "dst", htpasswd)}
    try:
        yield regs
    finally:
        for reg in regs.values():
            reg.stop()


@pytest.fixture
def authfile(tmp_path: Path, registries: dict[str, Registry]) -> Path:
    path = tmp_path / "auth.json"
    subprocess.run(["skopeo", "login", "--authfile", str(path), "--tls-verify=false",
                    "--username", USER, "--password-stdin", registries["dst"].host],
                   input=PASSWORD, text=True, check=True, capture_output=True)
    return path


def build_image(base: str, name: str, label: str) -> None:
    subprocess.run(["buildah", "build", "-q", "-t", name, "-f", "-", "."],
                   input=f"FROM {base}\nLABEL aipcc-test-release={label}\n", text=True,
                   check=True, capture_output=True)


def push(name: str, dest: str) -> str:
    """Push NAME to DEST (a registry reference without transport); its digest."""
    out = subprocess.run(["buildah", "push", "--tls-verify=false", "--digestfile",
                          "/dev/stdout", "--quiet", name, f"docker://{dest}"],
                         check=True, capture_output=True, text=True).stdout.strip()
    return out.splitlines()[-1]


@pytest.fixture
def release(tmp_path: Path, registries: dict[str, Registry],
            base_image: str) -> Iterator[dict[str, Any]]:
    """N images pushed to src/ns/base-images/NAME:3.0-42 and a report of them."""
    ns = f"{registries['src'].host}/aipcc"
    tag = uuid.uuid4().hex[:8]
    names, entries = [], []
    for index in range(3):
        local = f"localhost/aipcc-test-release/img{index}-{tag}"
        build_image(base_image, local, f"{tag}-{index}")
        names.append(local)
        reference = f"{ns}/base-images/img{index}:3.0-42"
        entries.append({"name": f"img{index}", "key": f"base/img{index}", "kind": "base",
                        "reference": reference, "status": "ok",
                        "digest": push(local, reference)})
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({"schema": 1, "build_id": "42", "images": entries}))
    project = tmp_path / "project"
    (project / "templates").mkdir(parents=True)
    (project / "templates" / "base.j2").write_text("FROM {{ from }}\n")
    (project / "matrix.yaml").write_text(MATRIX.format(registry=ns))
    try:
        yield {"report": report, "entries": entries, "ns": ns, "names": names,
               "matrix": project / "matrix.yaml"}
    finally:
        subprocess.run(["buildah", "rmi", "-f", *names], capture_output=True)


def run_cli(*args: str, cwd: Path | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("REGISTRY_AUTH_FILE", None)
    done = subprocess.run([sys.executable, "-m", "aipcc_build", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert PASSWORD not in done.stdout + done.stderr
    return done


def digest_at(ref: str, authfile: Path | None = None) -> str | None:
    args = ["skopeo", "inspect", "--raw", "--tls-verify=false"]
    if authfile:
        args += ["--authfile", str(authfile)]
    done = subprocess.run([*args, f"docker://{ref}"], capture_output=True)
    if done.returncode != 0:
        return None
    import hashlib

    return "sha256:" + hashlib.sha256(done.stdout).hexdigest()


class FlakyProxy:
    """An HTTP proxy on 127.0.0.1 to a registry that answers 503 to its first FAILURES
    requests (FAILURES < 0: always)."""

    def __init__(self, upstream: str, failures: int) -> None:
        self.upstream, self.failures, self.seen = upstream, failures, 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                proxy.seen += 1
                if proxy.failures < 0 or proxy.seen <= proxy.failures:
                    body = b"unavailable"
                    self.send_response(503)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else None
                request = urllib.request.Request(f"http://{proxy.upstream}{self.path}",
                                                 data=data, method=self.command)
                for name, value in self.headers.items():
                    if name.lower() not in ("host", "connection", "content-length"):
                        request.add_header(name, value)
                try:
                    answer = urllib.request.urlopen(request, timeout=60)
                except urllib.error.HTTPError as exc:
                    answer = exc
                payload = answer.read()
                self.send_response(answer.status if hasattr(answer, "status") else answer.code)
                for name, value in answer.headers.items():
                    if name.lower() in ("transfer-encoding", "connection") or (
                            name.lower() == "content-length" and self.command != "HEAD"):
                        continue
                    if name.lower() == "location":
                        value = value.replace(proxy.upstream, proxy.host)
                    self.send_header(name, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _forward

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any) -> None:
                return None

        urllib.request.install_opener(urllib.request.build_opener(NoRedirect))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FlakyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
