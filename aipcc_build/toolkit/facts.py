"""Facts about CUDA and ROCm toolkits and GPUs, loaded from the packaged `data/compat.yaml`.

The data file is the single place these facts live; every entry cites its public source.
Lookups answer `None` when the file does not know a version, so callers can warn by name.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Union

import yaml
from packaging.version import Version

from ..errors import InputError

_DRIVER_RE = re.compile(r"^\d{2,4}(\.\d{1,3}){0,2}$")


@dataclass(frozen=True, order=True)
class DriverVersion:
    """An NVIDIA driver version ("575.57.08"); orders numerically, keeps the text for display.

    A shorter version is a floor: "580" sorts before every 580.x.y.
    """

    parts: tuple[int, ...]
    text: str

    @classmethod
    def parse(cls, text: str) -> DriverVersion:
        text = str(text).strip()
        if not _DRIVER_RE.match(text):
            raise ValueError(f"{text!r} is not a driver version (expected e.g. 550.54.15)")
        return cls(tuple(int(p) for p in text.split(".")), text)

    @property
    def major(self) -> int:
        return self.parts[0]

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class CudaMajor:
    major: int
    min_driver: DriverVersion  # floor under minor-version compatibility
    source: str


@dataclass(frozen=True)
class CudaRelease:
    version: str  # "12.9.1"
    driver: DriverVersion  # bundled with the toolkit: at least this runs it natively
    source: str


@dataclass(frozen=True)
class CudaArchitectures:
    minor: str  # first minor these apply to, "12.8"
    compute_capabilities: tuple[str, ...]  # "9.0", "10.0", ...
    source: str


@dataclass(frozen=True)
class RocmRelease:
    minor: str  # "6.4"
    release: str  # the patch release the facts describe, "6.4.3"
    gfx_targets: tuple[str, ...]
    os_releases: tuple[str, ...]  # "RHEL 9.6"
    source: str


@dataclass(frozen=True)
class Gpu:
    name: str  # "H100", "MI300X"
    vendor: str  # "nvidia" or "amd"
    arch: str  # compute capability "9.0" or gfx target "gfx942"
    pci_device_ids: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class ToolkitFacts:
    path: str
    cuda_majors: Mapping[int, CudaMajor]
    cuda_releases: Mapping[str, CudaRelease]
    cuda_architectures: tuple[CudaArchitectures, ...]  # oldest minor first
    rocm_releases: Mapping[str, RocmRelease]
    gpus: tuple[Gpu, ...]

    def cuda_major(self, version: str) -> Optional[CudaMajor]:
        return self.cuda_majors.get(Version(version).major)

    def cuda_release(self, version: str) -> Optional[CudaRelease]:
        """The release `version` names; a bare minor ("12.9") means its newest known patch."""
        if version in self.cuda_releases:
            return self.cuda_releases[version]
        if len(version.split(".")) == 2:
            patches = [r for v, r in self.cuda_releases.items() if _minor(v) == version]
            if patches:
                return max(patches, key=lambda r: Version(r.version))
        return None

    def cuda_architectures_for(self, version: str) -> Optional[CudaArchitectures]:
        """Architectures of the newest listed minor not newer than `version`, same major."""
        wanted = Version(_minor(version))
        found = None
        for archs in self.cuda_architectures:
            listed = Version(archs.minor)
            if listed.major == wanted.major and listed <= wanted:
                found = archs
        return found

    def rocm_release(self, version: str) -> Optional[RocmRelease]:
        return self.rocm_releases.get(_minor(version))

    def sources(self) -> list[tuple[str, str]]:
        """(what, source) for every fact, in data-file order, for generated docs."""
        found = [(f"CUDA {m.major}.x minimum driver", m.source) for m in self.cuda_majors.values()]
        found += [(f"CUDA {r.version} driver", r.source) for r in self.cuda_releases.values()]
        found += [(f"CUDA {a.minor} architectures", a.source) for a in self.cuda_architectures]
        found += [(f"ROCm {r.minor} GPUs and OS releases", r.source)
                  for r in self.rocm_releases.values()]
        for vendor in ("nvidia", "amd"):
            gpu_sources = {g.source for g in self.gpus if g.vendor == vendor}
            found += [(f"{vendor.upper() if vendor == 'amd' else 'NVIDIA'} GPU architectures", s)
                      for s in sorted(gpu_sources)]
        return found

    def gpu_names(self) -> tuple[str, ...]:
        return tuple(gpu.name for gpu in self.gpus)

    def find_gpu(self, name: str) -> Gpu:
        """The GPU a product name means: "H100", "nvidia-h100-80gb-hbm3", "AMD_Instinct_MI300X".

        The longest known name whose words all appear in `name` wins, so "L40S" beats "L40".
        """
        wanted = _words(name)
        matches = [gpu for gpu in self.gpus if _words(gpu.name) <= wanted]
        if matches:
            return max(matches, key=lambda gpu: len(gpu.name))
        by_upper = {known.upper(): known for known in self.gpu_names()}
        closest = difflib.get_close_matches(name.upper(), list(by_upper), n=1, cutoff=0.4)
        hint = f" (did you mean {by_upper[closest[0]]}?)" if closest else ""
        raise InputError(
            f"unknown GPU {name!r}{hint}; known GPUs: {', '.join(self.gpu_names())}",
            field="gpu",
        )

    def find_gpu_by_pci_id(self, device_id: str) -> Optional[Gpu]:
        wanted = device_id.lower().removeprefix("0x")
        for gpu in self.gpus:
            if wanted in gpu.pci_device_ids:
                return gpu
        return None


# Vendor words in product labels ("NVIDIA-H100", "Tesla-T4", "AMD_Instinct_MI300X") say nothing
# about the model.
_NOISE_WORDS = frozenset({"nvidia", "tesla", "geforce", "amd", "instinct", "radeon", "oam"})


def _words(name: str) -> frozenset:
    return frozenset(w for w in re.split(r"[\s_\-]+", name.lower()) if w and w not in _NOISE_WORDS)


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def default_facts_path() -> Path:
    return Path(str(resources.files("aipcc_build") / "data" / "compat.yaml"))


def load_facts(path: Union[str, Path, None] = None) -> ToolkitFacts:
    """Load the data file (the packaged one by default) into typed facts."""
    path = Path(path) if path is not None else default_facts_path()
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise InputError(f"cannot read compatibility facts: {err}", file=str(path)) from err
    reader = _Reader(str(path))
    cuda = reader.section(raw, "cuda")
    rocm = reader.section(raw, "rocm")
    majors = {}
    for entry in reader.items(cuda, "majors"):
        major = CudaMajor(int(reader.get(entry, "major")),
                          reader.driver(entry, "min_driver"), reader.get(entry, "source"))
        majors[major.major] = major
    releases = {}
    for entry in reader.items(cuda, "releases"):
        release = CudaRelease(str(reader.get(entry, "version")), reader.driver(entry, "driver"),
                              reader.get(entry, "source"))
        releases[release.version] = release
    archs = tuple(sorted(
        (CudaArchitectures(str(reader.get(e, "minor")),
                           tuple(str(cc) for cc in reader.get(e, "compute_capabilities")),
                           reader.get(e, "source"))
         for e in reader.items(cuda, "architectures")),
        key=lambda a: Version(a.minor),
    ))
    rocm_releases = {}
    for entry in reader.items(rocm, "releases"):
        release_r = RocmRelease(
            str(reader.get(entry, "minor")), str(reader.get(entry, "release")),
            tuple(reader.get(entry, "gfx_targets")), tuple(reader.get(entry, "os_releases")),
            reader.get(entry, "source"),
        )
        rocm_releases[release_r.minor] = release_r
    gpus = []
    for vendor, section, arch_key in (("nvidia", cuda, "compute_capability"),
                                      ("amd", rocm, "gfx_target")):
        table = reader.section(section, "gpus")
        source = reader.get(table, "source")
        for entry in reader.items(table, "products"):
            pci_ids = tuple(str(i).lower() for i in entry.get("pci_device_ids", ()))
            gpus.append(Gpu(str(reader.get(entry, "name")), vendor,
                            str(reader.get(entry, arch_key)), pci_ids, source))
    return ToolkitFacts(str(path), majors, releases, archs, rocm_releases, tuple(gpus))


class _Reader:
    """Field access that names the data file and the missing field on error."""

    def __init__(self, path: str) -> None:
        self.path = path

    def section(self, parent: Any, key: str) -> dict[str, Any]:
        value = self.get(parent, key)
        if not isinstance(value, dict):
            raise InputError("expected a mapping", file=self.path, field=key)
        return value

    def items(self, parent: Any, key: str) -> list:
        value = self.get(parent, key)
        if not isinstance(value, list):
            raise InputError("expected a list", file=self.path, field=key)
        return value

    def get(self, parent: Any, key: str) -> Any:
        if not isinstance(parent, dict) or key not in parent:
            raise InputError("missing", file=self.path, field=key)
        return parent[key]

    def driver(self, parent: Any, key: str) -> DriverVersion:
        try:
            return DriverVersion.parse(self.get(parent, key))
        except ValueError as err:
            raise InputError(str(err), file=self.path, field=key) from err
