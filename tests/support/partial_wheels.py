"""Real members of wheels too big to download whole, and real Debian packages, cached.

A wheel is a zip: its central directory, at its end, says where each member's bytes are.
PyPI's file host answers HTTP range requests, so the central directory and the few members
a test needs (a build record, the dist-info, one provider library) are fetched alone and
written, unchanged, into a smaller wheel that pip installs like the original (pip lays out
the members the zip holds). Both are cached under $AIPCC_CACHE (default
~/.cache/aipcc-build), so a download happens once; a test skips naming the reason only
when the registry cannot be reached.

How the bytes are bound to the wheel PyPI publishes, short of its sha256 (which needs every
byte): the file is read from the address PyPI's JSON API gives, whose path is the file's
blake2b-256 digest that PyPI publishes beside its sha256 (checked); every range answer
names the published size as the file's length (checked); each member read passes its
CRC-32 from the central directory (zipfile checks it) and matches the sha256 the wheel's
own RECORD gives it (checked for every member RECORD names a hash for, and required of
every member asked for when RECORD names hashes at all: AMD's onnxruntime-rocm wheel names
none, its members are bound by CRC, address and length only; RECORD itself is read from
the same file).
"""

from __future__ import annotations

import base64
import csv
import fnmatch
import hashlib
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
            length = answer.headers.get("Content-Range", "").rpartition("/")[2]
            if length != str(self.size):
                raise ValueError(f"{self.url}: a range answer names the file's length "
                                 f"{length!r}, PyPI publishes {self.size}")
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
            address = urllib.parse.urljoin(url, entry["url"])
            blake2b = entry["digests"]["blake2b_256"]
            path = urllib.parse.urlsplit(address).path.split("/")
            if "".join(path[-4:-1]) != blake2b:
                raise ValueError(f"{address} is not the address of the file PyPI publishes "
                                 f"as blake2b_256 {blake2b}")
            return {**entry, "url": address}
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
            record = _record(original)
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as copy:
                for info in wanted:
                    data = original.read(info)  # raises BadZipFile on a CRC-32 mismatch
                    _check_record(record, info.filename, data,
                                  required=bool(record) and ".dist-info/" not in info.filename)
                    copy.writestr(info, data)
    except urllib.error.HTTPError:
        raise  # an answer: the wheel or the range request is refused, not unreachable
    except (OSError, urllib.error.URLError) as exc:
        pytest.skip(f"PyPI cannot be reached for {project}=={version}: {exc}")
    partial.replace(target)
    target.with_suffix(".members").write_text(key)
    return target


def _record(wheel: zipfile.ZipFile) -> dict[str, str]:
    """The wheel's RECORD: each member's published hash ("sha256=..."), by name."""
    [name] = [n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")
              and n.count("/") == 1]
    rows = csv.reader(io.StringIO(wheel.read(name).decode()))
    return {row[0]: row[1] for row in rows if len(row) >= 2 and row[1]}


def _check_record(record: dict[str, str], member: str, data: bytes, required: bool) -> None:
    """MEMBER's DATA against RECORD: a hash it names must match, and a REQUIRED member must
    have one (some wheels name none for their dist-info, AMD's onnxruntime-rocm none at
    all)."""
    algorithm, _, published = record.get(member, "").partition("=")
    if not algorithm and not required:
        return
    if algorithm != "sha256":
        raise ValueError(f"the wheel's RECORD names no sha256 for {member}")
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    if digest != published:
        raise ValueError(f"{member} does not match the sha256 the wheel's RECORD gives it")


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
