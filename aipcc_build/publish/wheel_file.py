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
import re
import zipfile
from dataclasses import dataclass, replace
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Optional

from ..validate.detect import WANT_MEMORY, LayerDetector, wheel_evidence
from ..validate.results import Evidence

# name-version(-build)?-python-abi-platform.whl; the name and version use '_' for '-'.
_WHEEL_NAME = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?)-(?P<version>[A-Za-z0-9_.!+]+)"
    r"(?:-\d[A-Za-z0-9_.]*)?-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+\.whl$")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
_PIN = re.compile(r"^\(?\s*===?\s*([A-Za-z0-9_.!+]+?)(?:\.\*)?\s*\)?$")
CHUNK = 1 << 20


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
    match = _WHEEL_NAME.match(filename)
    if not match:
        raise WheelError("not a wheel file name (name-version-python-abi-platform.whl)")
    return normalize(match.group("name")), match.group("version").replace("_", "-")


def metadata_of(path: Path) -> bytes:
    """The wheel's core metadata (`*.dist-info/METADATA`): what PEP 658 serves beside it."""
    with zipfile.ZipFile(path) as archive:
        return archive.read(_metadata_member(archive))


def _metadata_member(archive: zipfile.ZipFile) -> str:
    found = [n for n in archive.namelist()
             if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(found) != 1:
        raise WheelError(f"holds {len(found)} .dist-info/METADATA files, not one")
    return found[0]


def read(path: Path) -> tuple[WheelFacts, bytes]:
    """The facts of the wheel at PATH and its core metadata; WheelError when unreadable."""
    project, version = split_name(path.name)
    stat = path.stat()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    try:
        with zipfile.ZipFile(path) as archive:
            metadata = archive.read(_metadata_member(archive))
            detector = LayerDetector()
            for info in archive.infolist():
                if info.is_dir():
                    continue
                # Named as pip installs it, so that what the wheel keeps under its own
                # package (triton's CUPTI, torchvision.libs/) is told from the rest.
                member = INSTALLED + info.filename
                if detector.visit(member, "0", info.file_size) == WANT_MEMORY:
                    detector.content(member, archive.read(info))
    except (zipfile.BadZipFile, OSError, KeyError) as exc:
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
        filename=path.name, size=stat.st_size, mtime_ns=stat.st_mtime_ns,
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
        # Unpinned, only a -cuNN suffix says anything: the CUDA major.
        suffix = re.search(r"-cu(\d+)$", normalize(match.group(1)))
        if suffix is None:
            return None
        found = replace(found, release=suffix.group(1))
    return replace(found, kind="requires-dist")
