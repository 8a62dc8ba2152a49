"""An index as the source of `aipcc-build index`: VARIANT=https://HOST/.../simple/ reads the
wheels a PEP 503 index serves (a Pulp distribution, a static tree) into a temporary
directory, so that a mirror of it (a static tree for a disconnected site, or another Pulp)
gets exactly the same judgement as freshly built wheels: one refusal and nothing is
published.

Each wheel is checked against the sha256 its page gives, and its file name must be a plain
wheel name; a page link to a non-HTTP URL, a missing hash, two different files of one name
or a root page that lists no project (a login page, a proxy's error page answered with 200)
stop the run (exit 1) before anything is judged.

A user and password in the URL (https://USER:PASSWORD@host/...) are sent as HTTP basic
authentication to that host only, and never shown: every message masks them.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from ..errors import AipccError, without_credentials
from . import simple_index
from .pulp_api import Client
from .pulp_config import PulpServer

_WHEEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\.whl$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PROJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class IndexSourceError(AipccError):
    """An index to mirror served something unusable: exit 1, nothing published."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(without_credentials(message))


def is_index(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def _server(url: str) -> PulpServer:
    """The origin of URL, without its user information, which becomes basic
    authentication."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else \
        parts.hostname or ""
    return PulpServer(base_url=f"{parts.scheme}://{host}{port}",
                      username=unquote(parts.username) if parts.username else None,
                      password=unquote(parts.password or "") if parts.username else None)


def fetch(url: str, into: Path) -> int:
    """Every wheel the index at URL lists, into INTO; how many."""
    if not url.endswith("/"):
        url += "/"
    clients: dict[PulpServer, Client] = {}

    def client(of: str) -> Client:
        server = _server(of)
        if server not in clients:
            clients[server] = Client(server, label="the index source")
        return clients[server]

    text = client(url).request("GET", url, ok=(200,), raw=True)
    projects, _ = simple_index.read_root_page(text)
    if not projects:
        raise IndexSourceError(f"{url}: answered a page that lists no project: not an "
                               "index (an empty variant is not mirrored)")
    seen: dict[str, str] = {}
    for project in projects:
        if not _PROJECT.match(project):
            raise IndexSourceError(f"{url}: lists a project named {project!r}")
        page_url = f"{url}{project}/"
        for link in simple_index.read_project_page(client(page_url).request(
                "GET", page_url, ok=(200,), raw=True)):
            if not link.filename.endswith(".whl"):
                continue  # sdists are not published by aipcc-build index
            if not _WHEEL_NAME.match(link.filename):
                raise IndexSourceError(f"{page_url}: links a file named {link.filename!r}")
            if not _SHA256.match(link.sha256):
                raise IndexSourceError(f"{page_url}: {link.filename} has no sha256")
            if seen.get(link.filename, link.sha256) != link.sha256:
                raise IndexSourceError(f"{url}: two different files named {link.filename}")
            if link.filename in seen:
                continue
            target = urljoin(page_url, link.url)
            if urlsplit(target).scheme not in ("http", "https"):
                raise IndexSourceError(f"{page_url}: {link.filename} links {target!r}")
            destination = into / link.filename
            client(target).download(target, destination)
            digest = hashlib.sha256()
            with open(destination, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            if digest.hexdigest() != link.sha256:
                raise IndexSourceError(f"{target}: its sha256 differs from its page's")
            seen[link.filename] = link.sha256
    return len(seen)


@contextlib.contextmanager
def local(wheels: Mapping[str, tuple[str, ...]]) -> Iterator[dict[str, tuple[str, ...]]]:
    """WHEELS with every index URL replaced by a temporary directory of its wheels (removed
    on exit)."""
    temporary: list[Path] = []
    try:
        found: dict[str, tuple[str, ...]] = {}
        for variant, sources in wheels.items():
            directories = []
            for source in sources:
                if is_index(source):
                    directory = Path(tempfile.mkdtemp(prefix="aipcc-index-source-"))
                    temporary.append(directory)
                    fetch(source, directory)
                    source = str(directory)
                directories.append(source)
            found[variant] = tuple(directories)
        yield found
    finally:
        for directory in temporary:
            shutil.rmtree(directory, ignore_errors=True)
