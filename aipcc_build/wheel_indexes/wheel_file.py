"""Read one wheel file: its name, hash, core metadata, and what it says about toolkits.

The toolkit evidence comes from the validator's own detection: every member name goes
through the same `LayerDetector` that reads image layers (libraries such as
`libcudart.so.12.9.79`, NVIDIA's `nvidia/cu13/` trees, the wheel's own `.dist-info`
directory: `nvidia_cuda_runtime_cu12-12.9.79`, `torch-2.8.0+cu129`, `cupy_cuda11x-...`),
and each `Requires-Dist` is read as a dist-info of the project it names, so a pinned
`nvidia-cuda-runtime-cu12==12.9.79` counts as the 12.9 component it would install.
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
import zlib
from dataclasses import dataclass, replace
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import BinaryIO, Optional

from ..fsutil import NotRegularFile, open_regular
from ..toolkit.constraints import majors_named
from ..validate.detect import WANT_MEMORY, LayerDetector
from ..validate.distributions import wheel_evidence
from ..validate.results import Evidence

# name-version(-build)?-python-abi-platform.whl; the name and version use '_' for '-'.
_WHEEL_NAME = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?)-(?P<version>[A-Za-z0-9_.!+]+)"
    r"(?P<tags>(?:-\d[A-Za-z0-9_.]*)?-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+)\.whl$")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
_PIN = re.compile(r"^\(?\s*===?\s*([A-Za-z0-9_.!+]+?)(?:\.\*)?\s*\)?$")
CHUNK = 1 << 20
# Core metadata is kilobytes; what a hostile wheel's inflates to is held in memory.
METADATA_LIMIT = 8 << 20
# What the zip module raises on a damaged or unsupported archive.
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, KeyError, EOFError,
               RuntimeError, NotImplementedError, ValueError, zlib.error)


class WheelError(Exception):
    """The file is not a wheel this index can publish (the message says why)."""


INSTALLED = "/site-packages/"


def normalize(name: str) -> str:
    """PEP 503's name normalisation: runs of '-', '_' and '.' become '-', lower case."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class WheelFacts:
    """What the index needs from one wheel; kept in the index's manifest, so that an
    unchanged wheel (same name, size and modification time) is never read again."""

    filename: str
    size: int
    mtime_ns: int
    sha256: str
    project: str  # normalised
    version: str
    requires_python: Optional[str]
    metadata_sha256: str
    evidence: tuple[Evidence, ...]


def split_name(filename: str) -> tuple[str, str]:
    """(normalised project, version) of a wheel file name; WheelError when it is not one."""
    project, version, _ = identity(filename)
    return project, version


def identity(filename: str) -> tuple[str, str, str]:
    """(normalised project, version, build and compatibility tags) of a wheel file name:
    what an installer tells wheels apart by (`Foo_Bar-1.0-py3-none-any.whl` and
    `foo.bar-1.0-py3-none-any.whl` are one); WheelError when it is not a wheel's name."""
    match = _WHEEL_NAME.match(filename)
    if not match:
        raise WheelError("not a wheel file name (name-version-python-abi-platform.whl)")
    return (normalize(match.group("name")), match.group("version").replace("_", "-"),
            match.group("tags").lower())


def open_wheel(path: Path) -> BinaryIO:
    """PATH opened for reading when it is (or links to) a regular file; WheelError for a
    FIFO, a device, a directory or a dangling link, without blocking on any of them."""
    try:
        return open_regular(path)
    except NotRegularFile as exc:
        raise WheelError(exc.strerror) from None
    except OSError as exc:
        raise WheelError(f"cannot be read: {exc.strerror}") from None


def metadata_of(path: Path) -> bytes:
    """The wheel's core metadata (`*.dist-info/METADATA`): what PEP 658 serves beside it."""
    with open_wheel(path) as handle:
        try:
            with zipfile.ZipFile(handle) as archive:
                return _metadata(archive)
        except _ZIP_ERRORS as exc:
            raise WheelError(f"not a readable zip archive ({exc})") from None


def _metadata(archive: zipfile.ZipFile) -> bytes:
    found = [i for i in archive.infolist()
             if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")]
    if len(found) != 1:
        raise WheelError(f"holds {len(found)} .dist-info/METADATA files, not one")
    if found[0].file_size > METADATA_LIMIT:
        raise WheelError(f"its {found[0].filename} inflates to {found[0].file_size} bytes, "
                         f"more than the {METADATA_LIMIT} core metadata may hold")
    # The zip module reads no more than the size declared (and checks the CRC).
    return archive.read(found[0])


def _outside(name: str) -> bool:
    """Whether an installer would place member NAME outside the environment: pip refuses."""
    parts = name.replace("\\", "/").split("/")
    return name.startswith(("/", "\\")) or ".." in parts or re.match(r"^[A-Za-z]:", name) \
        is not None


def read(path: Path) -> tuple[WheelFacts, bytes]:
    """The facts of the wheel at PATH and its core metadata; WheelError when unreadable or
    when pip would refuse it."""
    project, version = split_name(path.name)
    with open_wheel(path) as handle:
        status = os.fstat(handle.fileno())
        digest = hashlib.sha256()
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
        handle.seek(0)
        try:
            with zipfile.ZipFile(handle) as archive:
                outside = next((i.filename for i in archive.infolist()
                                if _outside(i.filename)), None)
                if outside is not None:
                    raise WheelError(f"its member {outside!r} would be installed outside "
                                     "the environment")
                metadata = _metadata(archive)
                detector = LayerDetector()
                for info in archive.infolist():
                    if info.is_dir():
                        continue
                    # Named as pip installs it, so that what the wheel keeps under its
                    # own package (triton's CUPTI, torchvision.libs/) is told from the rest.
                    member = INSTALLED + info.filename
                    if detector.visit(member, "0", info.file_size) == WANT_MEMORY:
                        detector.content(member, archive.read(info))
        except _ZIP_ERRORS as exc:
            raise WheelError(f"not a readable zip archive ({exc})") from None
    headers = BytesHeaderParser().parsebytes(metadata)
    name = headers.get("Name")
    if name is None or normalize(name) != project:
        raise WheelError(f"its metadata names the project {name!r}, its file name {project!r}")
    evidence = [replace(e, path=e.path.removeprefix(INSTALLED), distribution=None)
                for e in detector.evidence]
    for requirement in headers.get_all("Requires-Dist") or []:
        found = _requirement_evidence(str(requirement))
        if found is not None:
            evidence.append(found)
    facts = WheelFacts(
        filename=path.name, size=status.st_size, mtime_ns=status.st_mtime_ns,
        sha256=digest.hexdigest(), project=project, version=version,
        requires_python=headers.get("Requires-Python") or None,
        metadata_sha256=hashlib.sha256(metadata).hexdigest(), evidence=tuple(evidence))
    return facts, metadata


def _requirement_evidence(requirement: str) -> Optional[Evidence]:
    """A Requires-Dist as evidence of the project it installs: a pinned NVIDIA component
    (`nvidia-cublas-cu12==12.9.1.4`), a `+cu129` pin, a CuPy for another CUDA major.
    Requirements behind an extra (`; extra == "cuda"`) are optional: not counted."""
    spec, _, marker = requirement.partition(";")
    if re.search(r"\bextra\s*==", marker):
        return None
    match = _REQUIREMENT.match(spec)
    if not match:
        return None
    pin = _PIN.match(match.group(2).strip())
    found = wheel_evidence("Requires-Dist", match.group(1),
                           pin.group(1) if pin else "")
    if found is None:
        return None
    if pin is None and found.release is None:
        # Unpinned, only the name says anything: the CUDA major whose components are named
        # so (-cu12; CUDA 13's carry no suffix).
        majors = majors_named(match.group(1))
        if len(majors) != 1:
            return None
        found = replace(found, release=majors[0])
    return replace(found, kind="requires-dist")
