"""A docker-registry (distribution) on 127.0.0.1 for integration tests, optionally asking
for a login: htpasswd with bcrypt entries (a Basic challenge), or a token from a realm (a
Bearer challenge, as quay.io and Docker Hub ask)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Registry:
    """A docker-registry (distribution) process on 127.0.0.1, storage in a temp dir."""

    def __init__(self, root: Path, htpasswd: Path | None = None,
                 token_realm: str | None = None, token_certs: Path | None = None,
                 access_log: Path | None = None) -> None:
        self.root = root
        # Where the registry's access log goes (a line a request, on its stdout): the
        # benchmarks count the requests of a run by kind; None: nowhere.
        self.access_log = access_log
        self.htpasswd = htpasswd  # bcrypt entries: the registry then asks for a login
        # A token service's URL, and the PEM bundle of the certificates its tokens are
        # signed with (distribution will not start without one).
        self.token_realm = token_realm
        self.token_certs = token_certs
        self.port = _free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        config = self.root / "config.yml"
        # The blob descriptor cache is on, as the distro's own config.yml and distribution's
        # sample configuration have it: without it every HEAD, mount and manifest write
        # stats each blob it names on disk, a registry nobody runs (the benchmarks measure
        # what a request costs a registry as it is deployed).
        config.write_text(
            "version: 0.1\n"
            "log: {level: error}\n"
            f"storage: {{filesystem: {{rootdirectory: {self.root / 'data'}}}, "
            "delete: {enabled: true}, cache: {blobdescriptor: inmemory}}\n"
            f"http: {{addr: '{self.host}'}}\n"
            + (f"auth: {{htpasswd: {{realm: test, path: {self.htpasswd}}}}}\n"
               if self.htpasswd else "")
            + (f"auth: {{token: {{realm: '{self.token_realm}', service: test-registry, "
               f"issuer: test-issuer, rootcertbundle: {self.token_certs}}}}}\n"
               if self.token_realm else "")
        )
        with open(self.access_log or "/dev/null", "ab") as log:
            self.proc = subprocess.Popen(
                [shutil.which("docker-registry") or "registry", "serve", str(config)],
                stdout=log, stderr=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1).close()
                return
            except urllib.error.HTTPError:
                return  # 401: up, and asking for a login
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("docker-registry did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None
