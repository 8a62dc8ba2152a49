"""Real members of wheels too big to download whole, and real Debian packages, cached.

A wheel is a zip: its central directory, at its end, says where each member's bytes are.
PyPI's file host answers HTTP range requests, so the central directory and the few members
a test needs (a build record, the dist-info, one provider library) are fetched alone and
written, unchanged, into a smaller wheel that pip installs like the original (pip lays out
the members the zip holds). Both are cached under $AIPCC_CACHE (default
~/.cache/aipcc-build), so a download happens once; a test skips naming the reason only
when the registry cannot be reached.
"""

from __future__ import annotations

import fnmatch
import io
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

PYPI = "https://pypi.org/pypi"
TIMEOUT = 120


def cache_dir() -> Path:
    return Path(os.environ.get("AIPCC_CACHE") or Path.home() / ".cache" / "aipcc-build")


class _Ranges(io.RawIOBase):
    """A remote file read by HTTP range requests (what zipfile seeks to, and no more)."""

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.position = url, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.position, 2: self.size}[whence]
        self.position = base + offset
        return self.position

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self.size - self.position)
        if wanted <= 0:
            return 0
        request = urllib.request.Request(self.url, headers={
            "Range": f"bytes={self.position}-{self.position + wanted - 1}",
            "User-Agent": "aipcc-build tests"})
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            if answer.status != 206:
                raise OSError(f"{self.url}: no range answer (HTTP {answer.status})")
            data = answer.read()
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)


def _wheel_file(project: str, version: str, tag: str) -> dict[str, object]:
    url = f"{PYPI}/{project}/json"
    with urllib.request.urlopen(url, timeout=TIMEOUT) as answer:
        files = json.load(answer)["releases"].get(version, [])
    for entry in files:
        if fnmatch.fnmatchcase(entry["filename"], f"*{tag}*.whl"):
            return {**entry, "url": urllib.parse.urljoin(url, entry["url"])}
    raise LookupError(f"{project}=={version} has no wheel tagged {tag}")


def partial_wheel(project: str, version: str, tag: str, members: Sequence[str]) -> Path:
    """A wheel of PROJECT==VERSION (the file whose name holds TAG) holding only its
    dist-info and the MEMBERS (globs), each byte for byte as the original holds it."""
    home = cache_dir() / "partial-wheels"
    key = "-".join(sorted(m.replace("/", "_").replace("*", "x") for m in members))
    found = [p for p in sorted(home.glob(f"{project.replace('-', '_')}-{version}-*.whl"))
             if fnmatch.fnmatchcase(p.name, f"*{tag}*.whl")]
    done = [p for p in found if p.with_suffix(".members").exists()
            and p.with_suffix(".members").read_text() == key]
    if done:
        return done[0]
    try:
        entry = _wheel_file(project, version, tag)
        remote = _Ranges(str(entry["url"]), int(entry["size"]))  # type: ignore[call-overload]
        with zipfile.ZipFile(io.BufferedReader(remote, 1 << 16)) as original:
            wanted = [info for info in original.infolist()
                      if ".dist-info/" in info.filename
                      or any(fnmatch.fnmatchcase(info.filename, m) for m in members)]
            home.mkdir(parents=True, exist_ok=True)
            target = home / str(entry["filename"])
            partial = target.with_suffix(".part")
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as copy:
                for info in wanted:
                    copy.writestr(info, original.read(info))
    except urllib.error.HTTPError:
        raise  # an answer: the wheel or the range request is refused, not unreachable
    except (OSError, urllib.error.URLError) as exc:
        pytest.skip(f"PyPI cannot be reached for {project}=={version}: {exc}")
    partial.replace(target)
    target.with_suffix(".members").write_text(key)
    return target


_APT_SOURCES = """\
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
http://deb.debian.org/debian bookworm main non-free
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
http://deb.debian.org/debian-security bookworm-security main non-free
"""


def debian_packages(names: Sequence[str]) -> Path:
    """A directory holding the .deb files of NAMES from Debian 12 (main and non-free),
    fetched once with apt-get download through apt lists of its own (the host's apt
    configuration is left alone)."""
    home = cache_dir() / "debs" / "bookworm"
    if all(list(home.glob(f"{name}_*.deb")) for name in names):
        return home
    if shutil.which("apt-get") is None:
        pytest.skip("no apt-get on this machine to fetch Debian packages")
    apt = cache_dir() / "debs" / "apt"
    for sub in ("lists/partial", "archives/partial"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(_APT_SOURCES)
    options = [f"-oDir::Etc::SourceList={apt / 'sources.list'}",
               "-oDir::Etc::SourceParts=/nonexistent", f"-oDir::State::Lists={apt / 'lists'}",
               f"-oDir::Cache={apt}", "-qq"]
    if os.geteuid() == 0:  # apt's _apt user cannot write into root's cache directory
        options.append("-oAPT::Sandbox::User=root")
    home.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["apt-get", *options, "update"], check=True, capture_output=True,
                       timeout=600)
        subprocess.run(["apt-get", *options, "download", *names], cwd=home, check=True,
                       capture_output=True, timeout=600)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"Debian's archive cannot be reached: {exc.stderr.decode()[-300:]}")
    return home
