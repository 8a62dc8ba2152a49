"""Facts about CUDA and ROCm toolkits and GPUs, loaded from the packaged `data/compat.yaml`.

The data file is the single place these facts live; every entry cites its public source.
Lookups answer `None` when the file does not know a version, so callers can warn by name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Union

from packaging.version import Version

from ..errors import InputError
from ..suggest import did_you_mean

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
    # NVIDIA data-center GPU: the only kind the CUDA forward-compat package runs on.
    data_center: bool = False
    # The CPU platform a node of this GPU has, when the GPU decides it: a Grace superchip
    # (GH200, GB200) is arm64. None: any.
    platform: Optional[str] = None


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
        hint = did_you_mean(name, self.gpu_names(), ignore_case=True, cutoff=0.4)
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
    """Load the data file (the packaged one by default) into typed facts; an error names
    the file, line, column and field, as the matrix's do (one reader of hand-written YAML)."""
    from ..positioned_yaml import Reader, compose

    path = Path(path) if path is not None else default_facts_path()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read compatibility facts: {err}", file=str(path)) from err
    root = compose(text, str(path))
    read = _FactsReader(Reader(str(path)))
    top = read.mapping(root, "", ("schema", "cuda", "rocm"), ("cuda", "rocm"))
    cuda = read.mapping(top["cuda"], "cuda", ("majors", "releases", "architectures", "gpus"),
                        ("majors", "releases", "architectures", "gpus"))
    rocm = read.mapping(top["rocm"], "rocm", ("releases", "gpus"), ("releases", "gpus"))
    majors = {}
    for field, entry in read.items(cuda["majors"], "cuda.majors",
                                   ("major", "min_driver", "source")):
        major = CudaMajor(int(read.text(entry, field, "major", _NUMBER, "a whole number")),
                          read.driver(entry, field, "min_driver"),
                          read.text(entry, field, "source"))
        majors[major.major] = major
    releases = {}
    for field, entry in read.items(cuda["releases"], "cuda.releases",
                                   ("version", "driver", "source")):
        release = CudaRelease(read.text(entry, field, "version"),
                              read.driver(entry, field, "driver"),
                              read.text(entry, field, "source"))
        releases[release.version] = release
    archs = tuple(sorted(
        (CudaArchitectures(read.text(entry, field, "minor"),
                           read.texts(entry, field, "compute_capabilities"),
                           read.text(entry, field, "source"))
         for field, entry in read.items(cuda["architectures"], "cuda.architectures",
                                        ("minor", "compute_capabilities", "source"))),
        key=lambda a: Version(a.minor),
    ))
    rocm_releases = {}
    for field, entry in read.items(rocm["releases"], "rocm.releases",
                                   ("minor", "release", "gfx_targets", "os_releases",
                                    "source")):
        release_r = RocmRelease(
            read.text(entry, field, "minor"), read.text(entry, field, "release"),
            read.texts(entry, field, "gfx_targets"), read.texts(entry, field, "os_releases"),
            read.text(entry, field, "source"),
        )
        rocm_releases[release_r.minor] = release_r
    gpus = []
    for vendor, section, name, arch_key in (("nvidia", cuda, "cuda", "compute_capability"),
                                            ("amd", rocm, "rocm", "gfx_target")):
        table = read.mapping(section["gpus"], f"{name}.gpus", ("products", "source"),
                             ("products", "source"))
        source = read.text(table, f"{name}.gpus", "source")
        for field, entry in read.items(table["products"], f"{name}.gpus.products",
                                       ("name", arch_key, "pci_device_ids", "data_center",
                                        "platform")):
            pci_ids = tuple(i.lower() for i in read.texts(entry, field, "pci_device_ids",
                                                          required=False))
            data_center = "data_center" in entry and read.text(
                entry, field, "data_center", _BOOLEAN, "true or false") == "true"
            platform = read.text(entry, field, "platform", _PLATFORM, "OS/ARCH") \
                if "platform" in entry else None
            gpus.append(Gpu(read.text(entry, field, "name"), vendor,
                            read.text(entry, field, arch_key), pci_ids, source, data_center,
                            platform))
    return ToolkitFacts(str(path), majors, releases, archs, rocm_releases, tuple(gpus))


_NUMBER = re.compile(r"\d+")
_BOOLEAN = re.compile(r"true|false")
_PLATFORM = re.compile(r"linux/(?:amd64|arm64|ppc64le|s390x)")


class _FactsReader:
    """The data file's shapes on top of the positioned reader: every value is read as its
    text (`12.10` stays 12.10), every error points at its node."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader

    def mapping(self, node: Any, field: str, allowed: tuple[str, ...],
                required: tuple[str, ...] = ()) -> dict[str, Any]:
        found = self.reader.mapping(node, field, allowed, required)
        return {key: value for key, (_, value) in found.items()}

    def items(self, node: Any, field: str,
              allowed: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
        """(field of the entry, its keys -> value nodes) per entry of the list at NODE; every
        key but `pci_device_ids`, `data_center` and `platform` is required."""
        required = tuple(key for key in allowed
                         if key not in ("pci_device_ids", "data_center", "platform"))
        return [(f"{field}[{index}]", self.mapping(entry, f"{field}[{index}]", allowed, required))
                for index, entry in enumerate(self.reader.sequence(node, field))]

    def text(self, entry: dict[str, Any], field: str, key: str,
             pattern: Optional[re.Pattern[str]] = None, what: str = "") -> str:
        return self.reader.scalar(entry[key], f"{field}.{key}", pattern, what)

    def texts(self, entry: dict[str, Any], field: str, key: str, *,
              required: bool = True) -> tuple[str, ...]:
        if key not in entry and not required:
            return ()
        return tuple(self.reader.scalar(node, f"{field}.{key}[{index}]") for index, node in
                     enumerate(self.reader.sequence(entry[key], f"{field}.{key}")))

    def driver(self, entry: dict[str, Any], field: str, key: str) -> DriverVersion:
        text = self.text(entry, field, key)
        try:
            return DriverVersion.parse(text)
        except ValueError as err:
            raise self.reader.error(entry[key], f"{field}.{key}", str(err)) from None
