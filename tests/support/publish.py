"""Fixtures of the promote and mirror tests: registries (one asking for a login), small
images pushed with buildah, a build report of them, and a 503-answering proxy."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.http_server import server_thread
from tests.support.registry import Registry

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


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Nothing printed: a handler fails when the client gave up on an answer the proxy
        held back (a stalled answer's test), and socketserver's traceback would land in the
        stderr of the command under test, run in this process."""


class FlakyProxy:
    """An HTTP proxy on 127.0.0.1 to a registry that answers STATUS (503 by default, with
    RETRY_AFTER seconds when given) to its first FAILURES requests (FAILURES < 0: always)
    whose method is one of METHODS (default: any). ANSWERED records (monotonic time,
    status) of every request. LIE (path fragment, digest): every answer about a path with
    the fragment carries Docker-Content-Digest: digest, whatever its content. HANG: requests
    of these methods are accepted and never answered; HANG_PATHS: nor are those whose path
    holds one of these fragments. PATH: only requests whose path holds it are failed.
    DIGEST_ONLY: a manifest written under a tag is stored under its digest only, and the
    write answered as the registry answers it (201): a front that loses tags; LOSE: only
    the tags holding one of these fragments are lost. DROP: a manifest written by digest
    whose bytes hold one of these fragments is answered as distribution answers it (201,
    Docker-Content-Digest of the bytes) and kept nowhere: a front that loses what it
    acknowledged. REQUESTS records (method, path) of every request."""

    def __init__(self, upstream: str, failures: int, status: int = 503,
                 retry_after: int | None = None,
                 methods: tuple[str, ...] | None = None,
                 lie: tuple[str, str] | None = None,
                 hang: tuple[str, ...] = (), hang_paths: tuple[str, ...] = (),
                 path: str | None = None, digest_only: bool = False,
                 lose: tuple[str, ...] = (), drop: tuple[bytes, ...] = ()) -> None:
        self.upstream, self.failures, self.seen = upstream, failures, 0
        self.digest_only, self.lose, self.drop = digest_only, lose, drop
        self.path = path
        self.lie = lie
        self.hang, self.hang_paths, self.released = hang, hang_paths, threading.Event()
        self.status, self.retry_after, self.methods = status, retry_after, methods
        self.answered: list[tuple[float, int]] = []
        self.requests: list[tuple[str, str]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                proxy.requests.append((self.command, self.path))
                if self.command in proxy.hang or any(
                        fragment in self.path for fragment in proxy.hang_paths):
                    proxy.released.wait(300)
                    self.close_connection = True
                    return
                counted = (proxy.methods is None or self.command in proxy.methods) and \
                    (proxy.path is None or proxy.path in self.path)
                proxy.seen += counted
                if counted and (proxy.failures < 0 or proxy.seen <= proxy.failures):
                    # The body read first, as a registry reads it: left unread, it was read
                    # as the next request on the kept connection (a 501 for its garbled
                    # request line, which failed the test on timing alone).
                    self._body()
                    proxy.answered.append((time.monotonic(), proxy.status))
                    body = b"unavailable"
                    self.send_response(proxy.status)
                    if proxy.retry_after is not None:
                        self.send_header("Retry-After", str(proxy.retry_after))
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                data = self._body()
                target = self.path
                if self.command == "PUT" and "/manifests/sha256:" in target and any(
                        fragment in (data or b"") for fragment in proxy.drop):
                    import hashlib

                    proxy.answered.append((time.monotonic(), 201))
                    self.send_response(201)
                    self.send_header("Docker-Content-Digest", "sha256:" + hashlib.sha256(
                        data or b"").hexdigest())
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                lost = proxy.digest_only or any(part in target for part in proxy.lose)
                if lost and self.command == "PUT" and "/manifests/" in target \
                        and "/manifests/sha256:" not in target:
                    import hashlib

                    target = (target.rsplit("/manifests/", 1)[0] + "/manifests/sha256:"
                              + hashlib.sha256(data or b"").hexdigest())
                request = urllib.request.Request(f"http://{proxy.upstream}{target}",
                                                 data=data, method=self.command)
                for name in set(self.headers.keys()):
                    if name.lower() not in ("host", "connection", "content-length",
                                            "transfer-encoding"):
                        # skopeo sends one Accept header per media type: all of them.
                        request.add_header(name, ", ".join(self.headers.get_all(name) or []))
                try:
                    answer = urllib.request.urlopen(request, timeout=60)
                except urllib.error.HTTPError as exc:
                    answer = exc
                payload = answer.read()
                proxy.answered.append((time.monotonic(), answer.status if hasattr(
                    answer, "status") else answer.code))
                self.send_response(answer.status if hasattr(answer, "status") else answer.code)
                for name, value in answer.headers.items():
                    if name.lower() in ("transfer-encoding", "connection") or (
                            name.lower() == "content-length" and self.command != "HEAD"):
                        continue
                    if name.lower() == "location":
                        value = value.replace(proxy.upstream, proxy.host)
                    if name.lower() == "docker-content-digest" and proxy.lie \
                            and proxy.lie[0] in self.path:
                        value = proxy.lie[1]
                    self.send_header(name, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            def _body(self) -> bytes | None:
                """The request's body, sent with a length or in chunks (skopeo's PATCH)."""
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        chunk = self.rfile.read(size)
                        self.rfile.readline()  # the CRLF after the chunk
                        if not size:
                            return b"".join(chunks)
                        chunks.append(chunk)
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _forward

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any) -> None:
                return None

        urllib.request.install_opener(urllib.request.build_opener(NoRedirect))
        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = server_thread(self.server)

    def __enter__(self) -> FlakyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
