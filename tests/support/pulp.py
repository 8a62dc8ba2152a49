"""A real Pulp (pulpcore + pulp_python) on 127.0.0.1 for the tests and the benchmark.

Its own PostgreSQL cluster (Debian's `postgresql` package: initdb, pg_ctl) on a free port
under a temporary directory, then pulpcore-api, pulpcore-content and one pulpcore-worker.
Two things are cached under $AIPCC_CACHE/pulp/<key>/, the key naming the pins below, the
PostgreSQL major version and the Python the venv is made with:
  venv/      pulpcore, pulp-python and pulp-cli from PyPI (~45 s to install, ~260 MB)
  pgdata/    a cluster with Pulp's database migrated and its admin password set (a copy of
             it starts in a second; migrating takes ~20 s)
  key        the database encryption key the snapshot was made with
A cold start builds both (each behind a lock and renamed into place when complete, so two
sessions, or one killed midway, never leave a half-made cache); a warm one copies the
snapshot and starts the services.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# The one place the Pulp versions are pinned (the tests and bench/pulp_publish.py read it).
PINS = ("pulpcore==3.123.1", "pulp-python==3.36.4", "pulp-cli==0.41.1")
USER = "admin"
PASSWORD = "aipcc-test-password"  # a throwaway server on 127.0.0.1
PG_BIN_GLOB = "/usr/lib/postgresql/*/bin"
# A matrix whose wheel_index is on a Pulp (format with api, prefix and base): three
# variants, cpu-debian, cuda12.8-debian and cuda12.9-debian, below PREFIX.
MATRIX = """\
schema: 1
product: {{name: wheeltest, version: "2.1"}}
registry: localhost/aipcc-test-pulp
wheel_index: "{api}/pypi/{prefix}/{{release}}/{{variant}}/simple/"
os:
  debian: {{from: {base}}}
accelerators:
  cuda:
    variant: "cuda-{{os}}"
    versions: [{{version: 12.9.1}}, {{version: 12.8.1}}]
  cpu: {{}}
images:
  app: {{template: app.Containerfile.j2, os: [debian]}}
"""
START_TIMEOUT = 120.0


def cache_root() -> Path:
    return Path(os.environ.get("AIPCC_CACHE") or Path.home() / ".cache" / "aipcc-build")


def postgres_bin() -> Optional[Path]:
    """The newest PostgreSQL's bin directory (Debian installs it off PATH), or None."""
    found = sorted(Path("/").glob(PG_BIN_GLOB.lstrip("/")),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    for directory in reversed(found):
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    for name in ("initdb", "pg_ctl", "postgres"):
        if shutil.which(name) is None:
            return None
    return Path(shutil.which("initdb") or "").resolve().parent


def unavailable() -> Optional[str]:
    """Why a Pulp cannot run here (to skip with), or None."""
    if postgres_bin() is None:
        return ("PostgreSQL is not installed (Debian: apt-get install postgresql; `make "
                "system` does it)")
    if sys.version_info < (3, 11) and shutil.which("python3.11") is None \
            and shutil.which("python3.12") is None:
        return "pulpcore needs Python >= 3.11"
    return None


def _python() -> str:
    if sys.version_info >= (3, 11):
        return sys.executable
    return shutil.which("python3.12") or shutil.which("python3.11") or sys.executable


def _key(pg: Path) -> str:
    """The cache's name: the pins, PostgreSQL's major version and the venv's Python."""
    python = os.path.realpath(_python())
    return hashlib.sha256(json.dumps([PINS, pg.parent.name, python]).encode()).hexdigest()[:12]


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _postgres_user() -> Optional[pwd.struct_passwd]:
    """As root, PostgreSQL runs as the postgres user (it refuses root)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        return None


def _as_postgres(argv: list[str]) -> list[str]:
    user = _postgres_user()
    if user is None:
        return argv
    return ["runuser", "-u", user.pw_name, "--", *argv]


def _own(path: Path) -> None:
    user = _postgres_user()
    if user is not None:
        for root, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(root, name), user.pw_uid, user.pw_gid)
        os.chown(path, user.pw_uid, user.pw_gid)


def ensure_venv() -> Path:
    """The cached virtualenv with the pinned Pulp (installed from PyPI when missing)."""
    pg = postgres_bin()
    assert pg is not None
    home = cache_root() / "pulp" / _key(pg)
    venv = home / "venv"
    if (venv / ".complete").exists():
        return venv
    with _lock(home / ".lock"):
        if (venv / ".complete").exists():
            return venv
        staging = home / f"venv.tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        # A venv's scripts name its path: build it where it will live, marked complete last.
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([_python(), "-m", "venv", str(venv)], check=True, timeout=300,
                       capture_output=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet",
                        "--disable-pip-version-check", *PINS], check=True, timeout=900,
                       capture_output=True)
        (venv / ".complete").write_text("\n".join(PINS) + "\n")
    return venv


@dataclass
class Pulp:
    """A running Pulp: its API and content origins, admin credentials, its working files."""

    api: str  # http://127.0.0.1:PORT (the API root is /pulp/api/v3/)
    content: str  # http://127.0.0.1:PORT (/pypi/ is served by the API too)
    user: str
    password: str
    work: Path
    venv: Path
    env: dict[str, str]
    processes: list[subprocess.Popen[bytes]]

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """pulp-cli against this server (its own config in the work directory)."""
        return subprocess.run([str(self.venv / "bin" / "pulp"), *args], capture_output=True,
                              text=True, timeout=timeout,
                              env={**self.env, "XDG_CONFIG_HOME": str(self.work / "config")})

    def get(self, path: str) -> dict:  # type: ignore[type-arg]
        request = urllib.request.Request(self.api + path, headers={
            "Authorization": "Basic " + base64.b64encode(
                f"{self.user}:{self.password}".encode()).decode()})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())  # type: ignore[no-any-return]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.work.glob("*.log")))


def _settings(work: Path, pg_port: int, api_port: int, content_port: int,
              key_file: Path) -> Path:
    path = work / "settings.py"
    media = work / "media"
    for directory in (media, work / "tmp", work / "static"):
        directory.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""\
SECRET_KEY = "aipcc-test-not-secret"
DATABASES = {{"default": {{"ENGINE": "django.db.backends.postgresql", "NAME": "pulp",
    "USER": "pulp", "PASSWORD": "pulp", "HOST": "127.0.0.1", "PORT": {pg_port}}}}}
MEDIA_ROOT = {str(media)!r}
STORAGES = {{"default": {{"BACKEND": "pulpcore.app.models.storage.FileSystem"}},
    "staticfiles": {{"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}}}
WORKING_DIRECTORY = {str(work / "tmp")!r}
STATIC_ROOT = {str(work / "static")!r}
FILE_UPLOAD_TEMP_DIR = {str(work / "tmp")!r}
CONTENT_ORIGIN = "http://127.0.0.1:{content_port}"
PYPI_API_HOSTNAME = "http://127.0.0.1:{api_port}"
DB_ENCRYPTION_KEY = {str(key_file)!r}
CACHE_ENABLED = False
REDIS_URL = None
ALLOWED_CONTENT_CHECKSUMS = ["sha224", "sha256", "sha384", "sha512"]
ANALYTICS = False
""")
    return path


def _pg_ctl(pg: Path, data: Path, *args: str, timeout: float = 60) -> None:
    subprocess.run(_as_postgres([str(pg / "pg_ctl"), "-D", str(data), *args]), check=True,
                   timeout=timeout, capture_output=True)


def _start_postgres(pg: Path, data: Path, port: int, log: Path) -> None:
    sockets = data.parent / "sockets"
    sockets.mkdir(exist_ok=True)
    _own(sockets)
    log.touch()
    _own(log)
    _pg_ctl(pg, data, "-w", "-l", str(log), "-o",
            f"-p {port} -c listen_addresses=127.0.0.1 -k {sockets} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off", "start", timeout=120)


def _snapshot(pg: Path, venv: Path, home: Path) -> Path:
    """The cached data directory with Pulp's database migrated (made when missing)."""
    snapshot = home / "pgdata"
    if (home / "pgdata.complete").exists():
        return snapshot
    with _lock(home / ".lock"):
        if (home / "pgdata.complete").exists():
            return snapshot
        work = Path(tempfile.mkdtemp(prefix="aipcc-pulp-migrate-"))
        os.chmod(work, 0o755)
        data = work / "pgdata"
        key_file = home / "key"
        key_file.write_bytes(base64.urlsafe_b64encode(os.urandom(32)))
        try:
            data.mkdir()
            _own(data)
            subprocess.run(_as_postgres([str(pg / "initdb"), "-D", str(data), "-U",
                                         "postgres", "--auth=trust", "-E", "UTF8",
                                         "--locale=C"]),
                           check=True, timeout=120, capture_output=True)
            port = free_port()
            _start_postgres(pg, data, port, work / "postgres.log")
            try:
                subprocess.run([str(pg / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U",
                                "postgres", "-q", "-c",
                                "CREATE USER pulp WITH PASSWORD 'pulp' SUPERUSER",
                                "-c", "CREATE DATABASE pulp OWNER pulp"],
                               check=True, timeout=60, capture_output=True)
                env = _env(venv, _settings(work, port, 1, 1, key_file))
                manager = str(venv / "bin" / "pulpcore-manager")
                subprocess.run([manager, "migrate", "--noinput"], check=True, timeout=600,
                               capture_output=True, env=env)
                subprocess.run([manager, "reset-admin-password", "--password", PASSWORD],
                               check=True, timeout=120, capture_output=True, env=env)
            finally:
                _pg_ctl(pg, data, "-m", "fast", "-w", "stop")
            shutil.rmtree(snapshot, ignore_errors=True)
            shutil.copytree(data, snapshot, symlinks=True)
            (home / "pgdata.complete").touch()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return snapshot


def _env(venv: Path, settings: Path) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["PULP_SETTINGS"] = str(settings)
    env["DJANGO_SETTINGS_MODULE"] = "pulpcore.app.settings"
    return env


def _wait(url: str, processes: list[subprocess.Popen[bytes]], deadline: float,
          check: Optional[str] = None) -> None:
    while True:
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"a Pulp service exited ({process.args!r})")
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                body = answer.read().decode()
                if check is None or check in body:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"Pulp did not answer at {url} in {START_TIMEOUT:.0f} s")
        time.sleep(0.2)


@contextlib.contextmanager
def running() -> Iterator[Pulp]:
    """Start a Pulp on free ports of 127.0.0.1; stop it and remove everything on exit."""
    pg = postgres_bin()
    assert pg is not None, unavailable()
    venv = ensure_venv()
    home = venv.parent
    snapshot = _snapshot(pg, venv, home)
    work = Path(tempfile.mkdtemp(prefix="aipcc-pulp-"))
    os.chmod(work, 0o755)  # the postgres user reaches its data directory
    data = work / "pgdata"
    processes: list[subprocess.Popen[bytes]] = []
    pg_started = False
    try:
        shutil.copytree(snapshot, data, symlinks=True)
        os.chmod(data, 0o700)
        _own(data)
        pg_port, api_port, content_port = free_port(), free_port(), free_port()
        _start_postgres(pg, data, pg_port, work / "postgres.log")
        pg_started = True
        env = _env(venv, _settings(work, pg_port, api_port, content_port, home / "key"))
        bin_ = venv / "bin"
        for name, argv in (
                ("api", [str(bin_ / "pulpcore-api"), "--bind", f"127.0.0.1:{api_port}",
                         "--workers", "2", "--timeout", "300"]),
                ("content", [str(bin_ / "pulpcore-content"), "--bind",
                             f"127.0.0.1:{content_port}", "--workers", "1"]),
                ("worker", [str(bin_ / "pulpcore-worker")])):
            # gunicorn puts its control socket under HOME: one per service.
            home_ = work / f"home-{name}"
            home_.mkdir()
            with open(work / f"{name}.log", "wb") as log:
                processes.append(subprocess.Popen(
                    argv, env={**env, "HOME": str(home_)}, stdout=log, stderr=log,
                    stdin=subprocess.DEVNULL, start_new_session=True))
        api = f"http://127.0.0.1:{api_port}"
        deadline = time.monotonic() + START_TIMEOUT
        _wait(f"{api}/pulp/api/v3/status/", processes, deadline, check='"online_workers":[{')
        _wait(f"http://127.0.0.1:{content_port}/pulp/content/", processes, deadline)
        config = work / "config" / "pulp"
        config.mkdir(parents=True)
        (config / "cli.toml").write_text(
            f'[cli]\nbase_url = "{api}"\nusername = "{USER}"\npassword = "{PASSWORD}"\n'
            'verify_ssl = false\nformat = "json"\ntimeout = 300\n')
        yield Pulp(api=api, content=f"http://127.0.0.1:{content_port}", user=USER,
                   password=PASSWORD, work=work, venv=venv, env=env, processes=processes)
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=20)
        if pg_started:
            with contextlib.suppress(subprocess.SubprocessError):
                _pg_ctl(pg, data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def another_api(pulp: Pulp, settings: str) -> Iterator[str]:
    """One more pulpcore-api for the same database, content app and worker, with SETTINGS
    (Python) added to the server's: another way to authenticate, say. Its origin."""
    port = free_port()
    path = pulp.work / f"settings-{port}.py"
    path.write_text((pulp.work / "settings.py").read_text() + settings)
    home = pulp.work / f"home-api-{port}"
    home.mkdir()
    with open(pulp.work / f"api-{port}.log", "wb") as log:
        process = subprocess.Popen(
            [str(pulp.venv / "bin" / "pulpcore-api"), "--bind", f"127.0.0.1:{port}",
             "--workers", "1", "--timeout", "300"],
            env={**pulp.env, "PULP_SETTINGS": str(path), "HOME": str(home)}, stdout=log,
            stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        origin = f"http://127.0.0.1:{port}"
        _wait(f"{origin}/pulp/api/v3/status/", [process],
              time.monotonic() + START_TIMEOUT)
        yield origin
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)
