"""Where CUDA and ROCm versions hide inside a layer, and in the image config.

`LayerDetector` sees every tar entry's path; most are rejected by one regex search. Names
alone give most evidence (trees, versioned libraries under any name a packaging tool gives
them, links named like them, dist-info directories, conda-meta records); the content of a
few small files is read (version.json, the build records of frameworks such as
torch/version.py, the dpkg database: `/var/lib/dpkg/status` and distroless's
one-file-per-package `status.d/`, the RECORD of each installed distribution, to name the
distribution that brought a file), the code of a vendored CUDA runtime whose name gives
its major only (`elf.runtime_release`), the dynamic section of every other shared object
(`elf.dynamic_entries`, read from the file's start as far as it reaches: what it links,
`builds`), and the rpmdb goes to a temporary file for sqlite.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Optional

from ..toolkit.components import (
    OWN_SCHEME,
    built_for,
    is_cuda_component,
    library_component,
    scheme,
)
from ..toolkit.spellings import CU_TAG, CUDA_ROOT, ROCM_INSTALL, ROCM_ROOT, cu_release
from .builds import backend, distribution_evidence, linked_evidence
from .config_env import major_minor
from .device_code import DeviceCodeReader
from .elf import DynamicEntries, ElfLimit, dynamic_entries, runtime_release
from .index_config import CONFIG_FILE, CONFIG_FILE_SUFFIXES, settings_from_text
from .packages import dpkg_packages, interesting_package, package_evidence
from .results import (
    BACKEND,
    LINKED,
    PRIVATE_TOOLCHAIN,
    ROCM_BUILD,
    UNPARSABLE,
    DeviceCode,
    Evidence,
    Hazard,
    IndexSetting,
)
from .rpmdb import RpmdbError, read_packages

# What the walker hands the detector of a member: nothing, its bytes, a temporary file, or
# a reader of its first bytes (`content_prefix`).
WANT_NONE, WANT_MEMORY, WANT_FILE, WANT_PREFIX = 0, 1, 2, 3
SMALL_FILE_LIMIT = 1 << 20  # version.json, version.py and friends are a few hundred bytes
DPKG_STATUS_LIMIT = 64 << 20
RECORD_LIMIT = 16 << 20  # torch's RECORD, the largest seen, is about 2 MB
ELF_LIMIT = 32 << 20  # a CUDA runtime is under 1 MB; its CUDA 13 builds a few
# RPM databases are copied to temporary files for sqlite: at most this many bytes at once
# per layer scan (a layer repeating a database, or holding huge ones, is refused instead).
SPOOL_LIMIT = 1 << 30

# Evidence kinds, as reported.
EVIDENCE_KINDS = (
    "cuda-tree", "rocm-tree", "version-file", "library", "rpm", "dpkg", "dist-info",
    "torch-version", "conda", "env", "symlink", "build-info", "private-toolchain",
    "cuda-build", LINKED, ROCM_BUILD, BACKEND,
)
# The hazard kind of a file past one of the ELF reader's limits (not read).
ELF_LIMIT_HAZARD = "elf-limit"
# The hazard kind of device code whose header breaks a limit (that container not counted).
DEVICE_CODE_HAZARD = "device-code-limit"
_ELF_MAGIC = b"\x7fELF"

# The tar walker's first filter, on raw name bytes (which lack the leading "/").
CANDIDATE_BYTES = re.compile(
    rb"usr/local/cuda|opt/rocm|\.dist-info|\.egg-info|\.so\.\d|torch/version\.py$|conda-meta/"
    rb"|var/lib/rpm/|usr/lib/sysimage/rpm/|var/lib/dpkg/status(?:$|\.d/)|/nvidia/cu\d"
    rb"|\.libs/|\.so$|/bin/(?:ptxas|nvdisasm|cuobjdump|nvlink|fatbinary)"
    rb"|/build_and_package_info\.py$|/platform/build_info\.py$|/paddle/version/__init__\.py$")
# ... and pip's and uv's config files, by an endswith (cheaper than one more alternative).
CANDIDATE_SUFFIXES = CONFIG_FILE_SUFFIXES
_CANDIDATE = re.compile(
    r"/usr/local/cuda|/opt/rocm|\.dist-info|\.egg-info|\.so\.\d|/torch/version\.py$|/conda-meta/"
    r"|/var/lib/rpm/|/usr/lib/sysimage/rpm/|/var/lib/dpkg/status(?:$|\.d/)|/nvidia/cu\d"
    r"|\.libs/|\.so$|/bin/(?:ptxas|nvdisasm|cuobjdump|nvlink|fatbinary)"
    r"|/build_and_package_info\.py$|/platform/build_info\.py$|/paddle/version/__init__\.py$|"
    + CONFIG_FILE.pattern)
_DPKG_STATUS = re.compile(r"^/var/lib/dpkg/status(?:\.d/[^/]+)?$")
# CUDA 13 wheels put their libraries under site-packages/nvidia/cu13/ (the major only).
_NVIDIA_WHEEL_TREE = re.compile(r"^(.*/nvidia/cu(\d+))(?:/|$)")
_CUDA_TREE = re.compile(rf"^{CUDA_ROOT}(?:/|$)")
_CUDA_VERSION_FILE = re.compile(r"^/usr/local/cuda(?:-\d+\.\d+)?/version\.(json|txt)$")
_ROCM_TREE = re.compile(rf"{ROCM_INSTALL.pattern}|^/opt/rocm/core-(\d+\.\d+)(?:/|$)")
_ROCM_VERSION_FILE = re.compile(rf"^(?:/opt/rocm|{ROCM_ROOT})/\.info/version$")
# A shared library under any name a packaging tool gives it: libcudart.so.12.8.90,
# auditwheel's libcudart-53d54daa.so.12.6.68 and libcudart.45e7f3ed.so.12.
_LIBRARY = re.compile(
    r"/lib(?P<stem>[A-Za-z0-9_+-]+?)(?:[-.](?P<hash>[0-9a-f]{8}))?\.so(?:\.(?P<version>\d+(?:\.\d+)*))?$")
_DIST_INFO = re.compile(r"^(.*/([^/]+)-([^/-]+)\.dist-info)(?:/|$)")
# What setuptools and distutils install instead (`setup.py install`, old pip): a directory
# or a single PKG-INFO file named NAME-VERSION[-pyX.Y[-PLATFORM]].egg-info.
_EGG_INFO = re.compile(r"^(.*/([^/-]+)-([^/-]+)(?:-[^/]*)?\.egg-info)(?:/|$)")
# An installed distribution's file list, and the directory its paths are relative to.
_RECORD = re.compile(r"^(.*/(?:site|dist)-packages)/([^/]+)-([^/-]+)\.dist-info/RECORD$")
# The package a file of site-packages belongs to: "triton", "torchvision.libs".
_SITE_PACKAGE = re.compile(r"^(.*/(?:site|dist)-packages)/([^/]+)/")
# Compiler tools and profiling libraries a package may keep for itself (triton's ptxas and
# CUPTI): a private toolchain, unless the image loads it as its runtime.
_PRIVATE_TOOL = re.compile(r"/bin/(ptxas|nvdisasm|cuobjdump|nvlink|fatbinary)(?:-[a-z0-9]+)?$")
_TOOLCHAIN_COMPONENTS = frozenset({"cuda-cupti"})
# Libraries whose file version is their API's, not the CUDA release: NVTX's
# libnvToolsExt.so.1.0.0 ships alike in CUDA 11.8 and 12.x (its package names the release).
_API_NUMBERED = frozenset({"nvToolsExt"})
_SHARED_OBJECT = re.compile(r"\.so(?:\.\d+)*$")
_SONAME_VERSION = re.compile(r"\d+(?:\.\d+)*")
# Build records of frameworks: which CUDA they were compiled with.
_BUILD_INFO = re.compile(
    r"/(?:onnxruntime/capi/build_and_package_info\.py|tensorflow/python/platform/build_info\.py"
    r"|paddle/version/__init__\.py)$")
# `cuda_version = '13.0'` (ONNX Runtime), `('cuda_version', '12.5.1')` (TensorFlow's
# OrderedDict), `'cuda_version': '12.6'`; `rocm_version`, `hip_version` alike.
_BUILD_VERSION = re.compile(
    r"""['"]?\b(cuda|rocm|hip)_version['"]?\s*[:=,]\s*['"](\d+\.\d+[\d.]*)['"]""")
_RPMDB = re.compile(r"^/(?:var/lib/rpm|usr/lib/sysimage/rpm)/rpmdb\.sqlite(-wal)?$")
_CONDA_META = re.compile(r"/conda-meta/([^/]+)\.json$")
_TORCH_CUDA = re.compile(r"^cuda\s*(?::[^=\n]*)?=\s*['\"](\d+\.\d+)", re.M)
_TORCH_HIP = re.compile(r"^hip\s*(?::[^=\n]*)?=\s*['\"](\d+\.\d+)", re.M)
_CUDA_TXT = re.compile(r"CUDA Version (\d+\.\d+[\d.]*)")
_LOCAL_CUDA = re.compile(rf"^{CU_TAG}$")  # "+cu129" -> 12.9, "+cu118" -> 11.8
_NVIDIA_WHEEL = re.compile(r"^nvidia-(.+?)(?:-cu(\d+))?$")
# conda package names and their component; their versions are the component's own.
_CONDA_CUDA = {
    "cuda-cudart": "cuda-runtime", "cuda-nvrtc": "cuda-nvrtc", "cuda-cupti": "cuda-cupti",
    "cuda-nvtx": "nvtx", "libcublas": "cublas", "libcufft": "cufft", "libcurand": "curand",
    "libcusolver": "cusolver", "libcusparse": "cusparse", "libnvjitlink": "nvjitlink",
    "libcufile": "cufile", "libnpp": "npp", "nccl": "nccl", "cudnn": "cudnn",
}


def _label(name: str, version: str) -> str:
    return f"{name.lower().replace('_', '-')} {version}"


def wheel_evidence(path: str, name: str, version: str) -> Optional[Evidence]:
    """Evidence from a dist-info directory name: NVIDIA wheels, a CUDA build named in the
    project (-cu126, cupy-cuda12x, jax-cuda12-plugin) or a +cu/+rocm local version."""
    project = name.lower().replace("_", "-").replace(".", "-")
    local = version.partition("+")[2]
    label = _label(name, version)
    match = _NVIDIA_WHEEL.match(project)
    if match and not local:
        # CUDA 13 wheels drop the -cuNN suffix: a known component name is enough. The
        # release comes from the component table at verdict time.
        # The component keeps its -cuNN suffix: it pins the CUDA major.
        component = project[len("nvidia-"):]
        if built_for(component)[1] or is_cuda_component(component):
            return Evidence("dist-info", path, "cuda", component, version, distribution=label)
        return None
    cuda = _LOCAL_CUDA.match(local)
    if cuda:
        return Evidence("dist-info", path, "cuda", project, version,
                        cu_release(*cuda.groups()), distribution=label,
                        detail=f"its local version +{local} names the CUDA build", built=True)
    found = distribution_evidence(path, project, version, label, local)
    if found:
        return found
    base, build = built_for(project)
    if build:
        return Evidence("dist-info", path, "cuda", project, version, build, distribution=label,
                        detail=f"its name says it is built for CUDA {build}", built=True)
    return None


def _soname_version(stem: str, soname: Optional[str]) -> Optional[str]:
    """The version a library's SONAME gives it, when the SONAME names the same library:
    ("amdhip64", "libamdhip64.so.7") -> "7"; anything else -> None."""
    if not soname or not soname.startswith(f"lib{stem}.so."):
        return None
    version = soname[len(stem) + 7:]
    return version if _SONAME_VERSION.fullmatch(version) else None


def conda_evidence(path: str, record: str) -> Optional[Evidence]:
    """Evidence from a conda-meta record name: NAME-VERSION-BUILD.json."""
    parts = record.rsplit("-", 2)
    if len(parts) != 3:
        return None
    name, version, build = parts
    if name == "cuda-version":
        return Evidence("conda", path, "cuda", "toolkit", version, major_minor(version))
    if name in _CONDA_CUDA:
        return Evidence("conda", path, "cuda", _CONDA_CUDA[name], version)
    built = re.search(r"cuda(\d+\.\d+)", build) or re.search(r"rocm(\d+\.\d+)", build)
    if built:
        toolkit = "cuda" if built.group(0).startswith("cuda") else "rocm"
        return Evidence("conda", path, toolkit, name, f"{version}-{build}", built.group(1))
    return None


def _names_its_target(library: re.Match[str], target: str) -> bool:
    """Whether a link named LIBRARY only shortens the name of its TARGET, the same
    library with a longer version (libcudart.so.11.0 -> libcudart.so.11.8.89): the target
    is judged by its own name. A link whose name claims more than its target's name
    (libcudart.so.12.9.79 -> libfoo.so, or -> libcudart.so.12.8.90) is judged by its name."""
    named = _LIBRARY.search("/" + target.rsplit("/", 1)[-1])
    if named is None or named.group("stem") != library.group("stem"):
        return False
    ours, theirs = library.group("version").split("."), (named.group("version") or "").split(".")
    return len(ours) < len(theirs) and theirs[0] == ours[0]


class LayerDetector:
    """Collects the evidence of one layer from the entries the tar walker shows it."""

    def __init__(self) -> None:
        self.evidence: list[Evidence] = []
        self.hazards: list[Hazard] = []
        self.content_paths: list[str] = []
        self.index_settings: list[IndexSetting] = []
        self._seen: set[str] = set()
        self._rpm_files: dict[str, Path] = {}
        self.spooled = 0  # bytes of temporary files held now
        self._records: dict[str, list[tuple[str, bytes]]] = {}  # site dir -> its RECORDs
        self._runtimes: dict[str, str] = {}  # vendored runtimes to read: path -> major
        self._linking: dict[str, str] = {}  # shared objects to read: path -> package
        self.device_code: list[DeviceCode] = []
        # libraries named without a version, judged by their SONAME: path -> (match, size)
        self._sonames: dict[str, tuple[re.Match[str], int]] = {}
        # directory -> (path, family, release, package) of its shared objects named for a
        # backend (libbitsandbytes_cuda128.so)
        self._backends: dict[str, list[tuple[str, str, Optional[str], str]]] = {}

    def _once(self, key: str) -> bool:
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def _limit(self, path: str, size: int, limit: int) -> bool:
        if size <= limit:
            self.content_paths.append(path)
            return True
        self.hazards.append(Hazard("oversized-file", path,
                                   f"{size} bytes, more than {limit}: not read", severe=False))
        return False

    def _spool(self, path: str, size: int) -> bool:
        """Whether SIZE more bytes of temporary disk fit for PATH's content."""
        previous = self._rpm_files.pop(path, None)
        if previous is not None:  # the later member of a name is the one that counts
            self.spooled -= previous.stat().st_size
            previous.unlink()
        if self.spooled + size > SPOOL_LIMIT:
            self.hazards.append(Hazard(
                "spool-limit", path, f"{size} bytes to copy for sqlite, with {self.spooled} "
                f"held already, exceed the {SPOOL_LIMIT} bytes of temporary disk a layer may "
                "use: not read", severe=True))
            return False
        self.spooled += size
        self.content_paths.append(path)
        return True

    def visit(self, path: str, kind: str, size: int, link: str = "") -> int:
        """Note what PATH's name says; answer whether its content is wanted. LINK is the
        target of a symbolic (kind "2") or hard link (kind "1")."""
        if not _CANDIDATE.search(path):
            return WANT_NONE
        regular = kind == "0"
        tree = _CUDA_TREE.match(path)
        if tree and self._once(f"cuda-tree:{tree.group(1)}"):
            root = f"/usr/local/cuda-{tree.group(1)}"
            self.evidence.append(Evidence("cuda-tree", root, "cuda", "toolkit", tree.group(1),
                                          tree.group(1)))
        rocm = _ROCM_TREE.match(path)
        if rocm:
            version = rocm.group(1) or rocm.group(2)
            root = f"/opt/rocm-{version}" if rocm.group(1) else f"/opt/rocm/core-{version}"
            if self._once(f"rocm-tree:{root}"):
                self.evidence.append(Evidence("rocm-tree", root, "rocm", "toolkit", version,
                                              major_minor(version)))
        wheel_tree = _NVIDIA_WHEEL_TREE.match(path)
        if wheel_tree and self._once(wheel_tree.group(1)):
            self.evidence.append(Evidence("library", wheel_tree.group(1), "cuda",
                                          f"nvidia-cu{wheel_tree.group(2)}",
                                          wheel_tree.group(2), wheel_tree.group(2)))
        if ".dist-info" in path:
            dist = _DIST_INFO.match(path)
            if dist and self._once(dist.group(1)):
                found = wheel_evidence(dist.group(1), dist.group(2), dist.group(3))
                if found:
                    self.evidence.append(found)
            if regular and _RECORD.match(path):
                return WANT_MEMORY if self._limit(path, size, RECORD_LIMIT) else WANT_NONE
            return WANT_NONE
        if ".egg-info" in path:
            egg = _EGG_INFO.match(path)
            if egg and self._once(egg.group(1)):
                found = wheel_evidence(egg.group(1), egg.group(2), egg.group(3))
                if found:
                    self.evidence.append(found)
            return WANT_NONE
        if kind in ("1", "2"):
            library = _LIBRARY.search(path)
            if library and "." in (library.group("version") or "") \
                    and not _names_its_target(library, link):
                how = "symbolic" if kind == "2" else "hard"
                self._library(path, library, size, f"a {how} link to {link}", regular=False)
            return WANT_NONE
        if not regular:
            return WANT_NONE
        if _CUDA_VERSION_FILE.match(path) or _ROCM_VERSION_FILE.match(path) \
                or path.endswith("/torch/version.py") or _BUILD_INFO.search(path):
            return WANT_MEMORY if self._limit(path, size, SMALL_FILE_LIMIT) else WANT_NONE
        if _DPKG_STATUS.match(path):
            return WANT_MEMORY if self._limit(path, size, DPKG_STATUS_LIMIT) else WANT_NONE
        if CONFIG_FILE.search(path):
            return WANT_MEMORY if self._limit(path, size, SMALL_FILE_LIMIT) else WANT_NONE
        if _RPMDB.match(path):
            return WANT_FILE if self._spool(path, size) else WANT_NONE
        tool = _PRIVATE_TOOL.search(path)
        package = _SITE_PACKAGE.match(path)
        if tool and package and package.group(2) != "nvidia":
            self.evidence.append(Evidence(
                PRIVATE_TOOLCHAIN, path, "cuda", tool.group(1), "",
                detail=f"a copy of NVIDIA's {tool.group(1)} that {package.group(2)} keeps "
                       "for itself"))
            return WANT_NONE
        library = _LIBRARY.search(path)
        if library:
            want = self._library(path, library, size, None, regular=True)
            # a toolkit library named for what it is still carries device code to read
            return WANT_PREFIX if want == WANT_NONE and size else want
        if _SHARED_OBJECT.search(path):
            return self._shared_object(path, package, size)
        conda = _CONDA_META.search(path)
        if conda:
            found = conda_evidence(path, conda.group(1))
            if found:
                self.evidence.append(found)
        return WANT_NONE

    def _shared_object(self, path: str, package: Optional[re.Match[str]], size: int) -> int:
        """A shared object no name above places: a package's one named for a backend
        (libtorch_cuda.so, libonnxruntime_providers_rocm.so) is a build of its package for
        that backend, whatever it links; what any shared object links is read from it."""
        named = backend(path)
        owner = package.group(2) if package else path.rsplit("/", 1)[-1]
        if named and package:
            family, release = named
            self._backends.setdefault(path.rsplit("/", 1)[0], []).append(
                (path, family, release, owner))
            if family != "cpu":
                kind = "cuda-build" if family == "cuda" else ROCM_BUILD
                self.evidence.append(Evidence(
                    kind, path, family, owner, "", built=True,
                    detail=f"a shared object named for {family.upper()}: a "
                           f"{family.upper()} build of its package"))
        if not size or not _SHARED_OBJECT.search(path):
            return WANT_NONE
        self._linking[path] = owner
        return WANT_PREFIX

    def content_prefix(self, path: str, read: Callable[[int], bytes],
                       skip: Callable[[int], int]) -> None:
        """A shared object read from its start: as far as its dynamic section reaches for
        what it links (when its name placed it nowhere) or its SONAME (when its name has no
        version), and to its end for the device code it carries (READ(n): the next n bytes;
        what is left unread, the walker skips: SKIP is not needed, every byte is fed to the
        device-code reader)."""
        owner = self._linking.pop(path, None)
        reader = DeviceCodeReader()

        def read_fed(size: int) -> bytes:
            piece = read(size)
            reader.feed(piece)
            return piece

        if owner is not None or path in self._sonames:
            try:
                entries = dynamic_entries(read_fed)
            except ElfLimit as exc:
                self.hazards.append(Hazard(ELF_LIMIT_HAZARD, path, f"{exc}: not read",
                                           severe=False))
                entries = None
            if path in self._sonames:
                self._by_soname(path, entries, None)
            elif entries is not None and owner is not None:
                self.evidence.extend(linked_evidence(path, entries, owner))
        if len(reader.head) < len(_ELF_MAGIC):
            read_fed(len(_ELF_MAGIC) - len(reader.head))
        if reader.head != _ELF_MAGIC:
            return  # not ELF (a linker script): no device code; the walker skips the rest
        while read_fed(1 << 20):
            pass
        self._device_code(path, reader)

    def _device_code(self, path: str, reader: DeviceCodeReader) -> None:
        found = reader.finish()
        self.hazards.extend(Hazard(DEVICE_CODE_HAZARD, path, f"{refusal}: not counted",
                                   severe=False) for refusal in found.refusals)
        if found.any:
            self.device_code.append(DeviceCode(path, found.sass, found.ptx, found.gfx,
                                               found.detail))

    def _by_soname(self, path: str, entries: Optional[DynamicEntries],
                   data: Optional[bytes]) -> None:
        """A library named without a version (libamdhip64.so, a vendored libcudart.so) is
        judged as its versioned twin, the file its SONAME names, would be (DATA: its bytes,
        when read whole)."""
        library, size = self._sonames.pop(path)
        soname = entries.soname if entries is not None else None
        version = _soname_version(library.group("stem"), soname)
        if version:
            library = _LIBRARY.search(f"{path}.{version}") or library
        want = self._library(path, library, size, f"its SONAME is {soname}" if version
                             else None, regular=True, by_soname=True)
        if want == WANT_MEMORY and data is not None:
            self.content(path, data)

    def _multi_backend(self) -> None:
        """A directory of shared objects named for two or more GPU backends (bitsandbytes:
        CUDA 11.8 to 13.2, ROCm 6.4 to 7.2, CPU) holds one package's run-time choices:
        each becomes `backend` evidence, which the verdict judges as a whole."""
        for libraries in self._backends.values():
            gpus = {(family, release) for _, family, release, _ in libraries
                    if family != "cpu"}
            if len(gpus) < 2:
                continue
            paths = {path for path, _, _, _ in libraries}
            self.evidence = [e for e in self.evidence if e.path not in paths]
            names = ", ".join(sorted({f"{f} {r}" if r else f for _, f, r, _ in libraries}))
            for path, family, release, owner in libraries:
                self.evidence.append(Evidence(
                    BACKEND, path, family, owner, release or "", release, detail=(
                        f"one of the {len(libraries)} backends {owner} picks among at run "
                        f"time: {names}")))

    def _library(self, path: str, library: re.Match[str], size: int, link: Optional[str],
                 regular: bool, by_soname: bool = False) -> int:
        stem, version = library.group("stem"), library.group("version") or ""
        component = library_component(stem)
        if regular and not version and size and not by_soname \
                and (stem == "amdhip64" or component is not None):
            self._sonames[path] = (library, size)
            if component == "cuda-runtime" and size <= ELF_LIMIT:
                return WANT_MEMORY  # its code may say its release: read it whole
            return WANT_PREFIX
        if stem == "amdhip64":
            # libamdhip64.so.6.4.43483 is ROCm 6.4; a wheel's bundled libamdhip64.so.6
            # (torch's ROCm builds) ROCm 6 (its soname major is the ROCm major).
            if version and (regular or "." in version):
                self.evidence.append(Evidence("library", path, "rocm", "hip", version,
                                              major_minor(version) or version, detail=link))
            return WANT_NONE
        if stem in _API_NUMBERED:
            return WANT_NONE
        package = _SITE_PACKAGE.match(path)
        if component is None:
            return self._shared_object(path, package, size) if regular else WANT_NONE
        owner = package.group(2) if package else None
        vendored = bool(library.group("hash")) or (owner or "").endswith(".libs")
        if owner and owner != "nvidia" and not vendored and component in _TOOLCHAIN_COMPONENTS:
            self.evidence.append(Evidence(
                PRIVATE_TOOLCHAIN, path, "cuda", component, version, detail=(
                    f"a copy of NVIDIA's {component} that {owner} keeps for itself")))
            return WANT_NONE
        detail = link or ("a vendored copy" if vendored else None)
        if "." in version:
            self.evidence.append(Evidence("library", path, "cuda", component, version,
                                          detail=detail))
            return WANT_NONE
        if not regular or not (vendored or (version and owner and owner != "nvidia")):
            return WANT_NONE  # the wheel's dist-info, or the file the link names, says more
        if component == "cuda-runtime" and size <= ELF_LIMIT:
            self._runtimes[path] = version
            self.content_paths.append(path)
            return WANT_MEMORY
        if scheme(component) == OWN_SCHEME:
            # cuDNN, NCCL, cuSPARSELt, cuDSS: the soname major is the library's own
            # (libcusparseLt.so.0), never a CUDA release.
            self.evidence.append(Evidence(
                "library", path, "cuda", component, version, None,
                detail=f"{detail or 'a library'}; numbered on its own: its name gives no "
                       "CUDA release"))
            return WANT_NONE
        self.evidence.append(Evidence(
            "library", path, "cuda", component, version, version or None,
            detail=f"{detail or 'a library'}; its name gives "
                   + (f"CUDA {version} only" if version else "no version")))
        return WANT_NONE

    def content(self, path: str, data: bytes) -> None:
        if path in self._sonames:
            try:
                entries = dynamic_entries(io.BytesIO(data).read)
            except ElfLimit:
                entries = None
            self._by_soname(path, entries, data)
            return
        if path in self._runtimes:
            self._runtime(path, data)
            return
        record = _RECORD.match(path)
        if record:
            self._records.setdefault(record.group(1), []).append(
                (_label(record.group(2), record.group(3)), data))
            return
        text = data.decode("utf-8", "replace")
        if CONFIG_FILE.search(path):
            settings, problem = settings_from_text(path, text, path.endswith(".toml"))
            self.index_settings.extend(settings)
            if problem:
                self.hazards.append(Hazard(UNPARSABLE, path, problem, severe=False))
        elif path.endswith("/version.json"):
            try:
                version = str(json.loads(text)["cuda"]["version"])
            except (ValueError, KeyError, TypeError, RecursionError):
                self.hazards.append(Hazard(UNPARSABLE, path, "no cuda.version",
                                           severe=False))
                return
            self.evidence.append(Evidence("version-file", path, "cuda", "toolkit", version,
                                          major_minor(version)))
        elif path.endswith("/version.txt"):
            match = _CUDA_TXT.search(text)
            if match:
                self.evidence.append(Evidence("version-file", path, "cuda", "toolkit",
                                              match.group(1), major_minor(match.group(1))))
        elif path.endswith("/.info/version"):
            version = text.strip().split("-")[0]
            self.evidence.append(Evidence("version-file", path, "rocm", "toolkit", version,
                                          major_minor(version)))
        elif path.endswith("/torch/version.py"):
            for pattern, toolkit in ((_TORCH_CUDA, "cuda"), (_TORCH_HIP, "rocm")):
                match = pattern.search(text)
                if match:
                    self.evidence.append(Evidence("torch-version", path, toolkit, "torch",
                                                  match.group(1), match.group(1),
                                                  built=True))
        elif _BUILD_INFO.search(path):
            package = _SITE_PACKAGE.match(path)
            for key, version in dict(_BUILD_VERSION.findall(text)).items():
                toolkit = "cuda" if key == "cuda" else "rocm"
                self.evidence.append(Evidence(
                    "build-info", path, toolkit,
                    package.group(2) if package else "framework", version,
                    major_minor(version), built=True,
                    detail=f"its build record says {key}_version {version}"))
        elif _DPKG_STATUS.match(path):
            for name, version, source in dpkg_packages(
                    text, installed_by_default=path != "/var/lib/dpkg/status"):
                found = package_evidence("dpkg", path, name, version, source)
                if found:
                    self.evidence.append(found)

    def _runtime(self, path: str, data: bytes) -> None:
        """A CUDA runtime whose name gives its major at most: its release is in its code."""
        major = self._runtimes.pop(path)
        try:
            release = runtime_release(data)
        except ElfLimit as exc:
            self.hazards.append(Hazard(ELF_LIMIT_HAZARD, path, f"{exc}: not read",
                                       severe=False))
            release = None
        if release is not None and (not major or release.split(".")[0] == major):
            self.evidence.append(Evidence(
                "library", path, "cuda", "cuda-runtime", release, release, detail=(
                    "a vendored copy; its release read from its code: the version "
                    "cudaRuntimeGetVersion returns")))
            return
        why = "its code holds no version this reader knows" if release is None else \
            f"its code says {release}, its name {major}"
        self.evidence.append(Evidence(
            "library", path, "cuda", "cuda-runtime", major, major or None,
            detail=f"a vendored copy; {why}" + (f": CUDA {major} by its name" if major else "")))

    def _attribute(self) -> None:
        """Name the distribution whose RECORD lists each piece of evidence's file."""
        if not self._records:
            return
        indexed: dict[str, dict[bytes, str]] = {}

        def owners(site: str) -> dict[bytes, str]:
            """The files the RECORDs of SITE list, each with its distribution (the first
            RECORD to list it): one pass over each RECORD, however much evidence."""
            if site not in indexed:
                found: dict[bytes, str] = {}
                for label, record in self._records[site]:
                    for line in record.split(b"\n"):
                        found.setdefault(line.split(b",", 1)[0], label)
                indexed[site] = found
            return indexed[site]

        for number, evidence in enumerate(self.evidence):
            site = _SITE_PACKAGE.match(evidence.path)
            if evidence.distribution or not site or site.group(1) not in self._records:
                continue
            relative = evidence.path[len(site.group(1)) + 1:].encode()
            label = owners(site.group(1)).get(relative)
            if label is not None:
                self.evidence[number] = replace(evidence, distribution=label)
        for number, code in enumerate(self.device_code):
            site = _SITE_PACKAGE.match(code.path)
            if site and site.group(1) in self._records:
                label = owners(site.group(1)).get(code.path[len(site.group(1)) + 1:].encode())
                self.device_code[number] = replace(code, distribution=label)

    def content_file(self, path: str, file: Path) -> None:
        self._rpm_files[path] = file

    def _rpm(self) -> None:
        for path, file in self._rpm_files.items():
            if path.endswith("-wal"):
                if path[:-4] not in self._rpm_files and file.stat().st_size:
                    # rpm wrote to the log only (another process held the database open):
                    # its transactions are not read with the lower layer's database.
                    self.hazards.append(Hazard("unreadable-rpmdb", path, "a write-ahead log "
                                               "without its database in this layer: not "
                                               "read", severe=False))
                continue
            wal = self._rpm_files.get(f"{path}-wal")
            if wal is not None and wal.stat().st_size:
                # sqlite finds the log by name: put both side by side under their own names.
                home = file.parent / f"{file.name}.db"
                home.mkdir()
                db = file.rename(home / "rpmdb.sqlite")
                wal = wal.rename(home / "rpmdb.sqlite-wal")
            else:
                db, wal = file, None
            try:
                packages = read_packages(db, interesting_package, wal)
            except RpmdbError as exc:
                self.hazards.append(Hazard("unreadable-rpmdb", path, str(exc), severe=False))
                continue
            for name, version, release in packages:
                found = package_evidence("rpm", path, name, f"{version}-{release}")
                if found:
                    self.evidence.append(found)

    def finish(self) -> tuple[list[Evidence], list[str], list[Hazard]]:
        self._rpm()
        self._multi_backend()
        self._attribute()
        return self.evidence, self.content_paths, self.hazards
