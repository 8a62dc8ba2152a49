"""Map CUDA component versions to the CUDA release they ship with.

The table lives in `aipcc_build/data/cuda-components.json`; every entry names its sources.
It lists every CUDA release X.Y.Z from 12.0.0 with its components' versions as NVIDIA's
redistrib manifests state them, plus pins from framework builds. cuFFT, cuRAND, cuSOLVER,
cuSPARSE and NPP have their own numbering (cuSPARSE is 12.5.x under both CUDA 12.8 and 12.9),
so only exact versions map; an unknown version is `unmapped`, never guessed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional, Protocol

_SUFFIX = re.compile(r"^(.+)-cu(\d+)$")
_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")
_MINOR = re.compile(r"^\d+\.\d+$")

# Short names callers use for the table's component names.
_ALIASES = {
    "cudart": "cuda-runtime",
    "runtime": "cuda-runtime",
    "nvrtc": "cuda-nvrtc",
    "cupti": "cuda-cupti",
    "nvcc": "cuda-nvcc",
}


class Found(Protocol):
    """What names a component version: the validator's evidence, a wheel's name."""

    @property
    def toolkit(self) -> str: ...
    @property
    def component(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def release(self) -> Optional[str]: ...


class UnknownRelease(KeyError):
    """The table has no such CUDA release (or the release lacks the component asked for)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class ComponentTable:
    releases: frozenset[str]  # every CUDA release ("12.8")
    release_numbered: frozenset[str]  # components versioned as the CUDA release
    exact: dict[tuple[str, str], tuple[str, ...]]  # (component, version) -> releases
    # components that follow the release numbering in some majors only: cuBLAS in 12
    numbered_majors: dict[str, frozenset[str]]
    full: dict[str, dict[str, str]]  # "12.8.1" -> {component: manifest version}
    wheel_suffix: dict[str, str]  # CUDA major -> wheel project suffix ("12" -> "-cu12")
    rpm_suffix: str  # NVIDIA's RPM release field: "-1"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


@lru_cache(maxsize=1)
def table() -> ComponentTable:
    # The package's own data file, read by path: importlib.resources would import tempfile,
    # shutil and zipfile, a tenth of a validation served from the cache. aipcc-build is
    # installed as files (facts.py relies on it too).
    text = (Path(__file__).resolve().parent.parent / "data" / "cuda-components.json").read_text()
    data = json.loads(text)
    exact: dict[tuple[str, str], list[str]] = {}

    def add(component: str, version: str, release: str) -> None:
        found = exact.setdefault((component, version), [])
        if release not in found:
            found.append(release)

    full: dict[str, dict[str, str]] = {}
    for entry in data.get("releases", []):
        minor = ".".join(entry["release"].split(".")[:2])
        full[entry["release"]] = dict(entry["components"])
        for component, version in entry["components"].items():
            add(component, version, minor)
    for entry in data["components"]:
        for release in entry["cuda"]:
            add(entry["component"], entry["version"], release)
    numbered = data["release_numbered"]
    wheels = data.get("wheels", {})
    return ComponentTable(
        releases=frozenset(data["cuda_releases"]["releases"]),
        release_numbered=frozenset(numbered["components"]),
        exact={k: tuple(sorted(v, key=_key)) for k, v in exact.items()},
        numbered_majors={c: frozenset(m) for c, m in numbered.get("majors", {}).items()},
        full=full,
        wheel_suffix=dict(wheels.get("suffix", {"12": "-cu12"})),
        rpm_suffix=data.get("rpm", {}).get("release_suffix", "-1"),
    )


def _split(component: str) -> tuple[str, Optional[str]]:
    """"cudnn-cu12" -> ("cudnn", "12"): wheel names carry the CUDA major as a suffix."""
    match = _SUFFIX.match(component)
    return (match.group(1), match.group(2)) if match else (component, None)


def is_cuda_component(component: str) -> bool:
    base, _ = _split(component)
    known = table()
    return base in known.release_numbered or any(c == base for c, _ in known.exact)


def _exact(known: ComponentTable, base: str, version: str) -> Optional[tuple[str, ...]]:
    """An exact entry; a wheel may append parts to the manifest's version (12.8.90.1)."""
    releases = known.exact.get((base, version))
    parts = version.split(".")
    while releases is None and len(parts) > 3:
        parts.pop()
        releases = known.exact.get((base, ".".join(parts)))
    return releases


def resolve(evidence: Found) -> Optional[tuple[str, ...]]:
    """The releases this evidence belongs to ("12.8", or "12" for any 12.x); None: unmapped."""
    if evidence.release:
        return (evidence.release,)
    if evidence.toolkit != "cuda":
        return None
    known = table()
    base, major = _split(evidence.component)
    releases = _exact(known, base, evidence.version)
    if releases is None and base in known.release_numbered:
        match = re.match(r"(\d+)\.(\d+)", evidence.version)
        majors = known.numbered_majors.get(base)
        if match and match.group(0) in known.releases and (
                majors is None or match.group(1) in majors):
            releases = (match.group(0),)
    if releases and major:
        releases = tuple(r for r in releases if r.split(".")[0] == major) or None
    return releases


def fits(releases: tuple[str, ...], expected: str) -> bool:
    """Whether evidence of RELEASES belongs in an image of EXPECTED ("12.8")."""
    major = expected.split(".")[0]
    return any(r == expected or ("." not in r and r == major) for r in releases)


def known_releases() -> list[str]:
    """Every full CUDA release the table lists ("12.0.0" ... ), oldest first."""
    return sorted(table().full, key=_key)


def knows_release(release: str) -> bool:
    """Whether the table knows RELEASE: a minor ("12.8") or a full release ("12.8.1")."""
    known = table()
    if _RELEASE.match(release):
        return release in known.full
    if _MINOR.match(release):
        return any(r.rsplit(".", 1)[0] == release for r in known.full)
    return False


def release_components(release: str) -> dict[str, str]:
    """Component -> version for a full CUDA release ("12.8.1"), as NVIDIA's manifest states it.

    Component names are the table's ("cuda-runtime", "nvtx", "cuda-cupti", "cublas", ...).
    Raises UnknownRelease (a KeyError) naming RELEASE when the table does not list it.
    """
    known = table()
    if release not in known.full:
        if _MINOR.match(release):
            patches = [r for r in known_releases() if r.rsplit(".", 1)[0] == release]
            hint = f"; give a full release: {', '.join(patches)}" if patches else ""
        else:
            hint = ""
        raise UnknownRelease(f"CUDA release {release!r} is not in the component table{hint}")
    return dict(known.full[release])


def _component(component: str, release: str) -> tuple[str, str]:
    name = _ALIASES.get(component, component)
    versions = release_components(release)
    if name not in versions:
        raise UnknownRelease(
            f"the component table lists no {component!r} for CUDA release {release!r}")
    return name, versions[name]


def wheel_project(component: str, release: str) -> str:
    """The pip project of COMPONENT for RELEASE: nvidia-cuda-runtime-cu12, nvidia-cuda-runtime."""
    name = _ALIASES.get(component, component)
    major = release.split(".")[0]
    return f"nvidia-{name}{table().wheel_suffix.get(major, '')}"


def wheel_requirement(component: str, release: str, *, wildcard: bool = False) -> str:
    """The pip requirement for COMPONENT of a full RELEASE.

    ("cuda-runtime", "12.8.1") -> "nvidia-cuda-runtime-cu12==12.8.90";
    ("cuda-runtime", "13.0.1") -> "nvidia-cuda-runtime==13.0.88". With WILDCARD the
    requirement also admits a wheel that appends a part ("==12.8.90.*"), as NVIDIA's
    cuda-toolkit meta-package pins. Raises UnknownRelease naming what is missing.
    """
    name, version = _component(component, release)
    return f"{wheel_project(name, release)}=={version}{'.*' if wildcard else ''}"


def rpm_versions(release: str) -> dict[str, str]:
    """NVIDIA's RPM versions for a full RELEASE, as the production templates read them.

    cuda-cudart-X-Y is versioned as cudart plus "-1"; cuda-libraries-X-Y as the full release
    plus "-1": rpm_versions("12.9.1") == {"cudart": "12.9.79-1", "cuda_libraries": "12.9.1-1"}.
    """
    _, cudart = _component("cuda-runtime", release)
    suffix = table().rpm_suffix
    return {"cudart": cudart + suffix, "cuda_libraries": release + suffix}
