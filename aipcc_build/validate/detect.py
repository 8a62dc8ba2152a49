"""Where CUDA and ROCm versions hide inside a layer: each member routed, by its path, to
the module that reads it, within the limits of what a layer's scan reads.

`LayerDetector` sees every tar entry's path; most are rejected by one regex search. Names
alone give most evidence (toolkit trees, here; versioned libraries under any name a
packaging tool gives them and links named like them, `libraries`; installed distributions'
names and conda-meta records, `distributions`); the content of a few small files is read
(`version_files`: version.json and the build records of frameworks such as
torch/version.py; `packages`: the dpkg database, `/var/lib/dpkg/status` and distroless's
one-file-per-package `status.d/`; `distributions`: the RECORD of each installed
distribution, to name the distribution that brought a file; `index_config`: pip's and uv's
config files), the code of a vendored CUDA runtime whose name gives its major only
(`elf.runtime_evidence`), the dynamic section of every other shared object
(`elf.dynamic_entries`, read from the file's start as far as it reaches: its SONAME, what
it links, `builds`) and the device code it carries (`device_code`), and the rpmdb goes to
a temporary file for sqlite (`packages.rpm_evidence`).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from ..toolkit.spellings import CUDA_ROOT, ROCM_INSTALL
from .builds import backend, backend_evidence, linked_evidence
from .config_env import major_minor
from .device_code import DeviceCodeReader, device_code_evidence
from .distributions import (
    CONDA_META,
    DIST_INFO,
    EGG_INFO,
    RECORD,
    SITE_PACKAGE,
    attribute,
    conda_evidence,
    distribution_label,
    wheel_evidence,
)
from .elf import (
    ELF_LIMIT_HAZARD,
    DynamicEntries,
    ElfLimit,
    dynamic_entries,
    runtime_evidence,
    soname_version,
)
from .index_config import CONFIG_FILE, settings_from_text
from .libraries import (
    LIBRARY,
    READ_RUNTIME,
    READ_SHARED_OBJECT,
    READ_SONAME,
    READ_SONAME_WHOLE,
    library_evidence,
    names_its_target,
)
from .packages import dpkg_evidence, rpm_evidence
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
from .version_files import is_version_file, version_file_evidence

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
_ELF_MAGIC = b"\x7fELF"

# The tar walker's first filter, on raw name bytes (which lack the leading "/").
CANDIDATE_BYTES = re.compile(
    rb"usr/local/cuda|opt/rocm|\.dist-info|\.egg-info|\.so\.\d|torch/version\.py$|conda-meta/"
    rb"|var/lib/rpm/|usr/lib/sysimage/rpm/|var/lib/dpkg/status(?:$|\.d/)|/nvidia/cu\d"
    rb"|\.libs/|\.so$|/bin/(?:ptxas|nvdisasm|cuobjdump|nvlink|fatbinary)"
    rb"|/build_and_package_info\.py$|/platform/build_info\.py$|/paddle/version/__init__\.py$")
# Every path the detector takes anything from matches this, its first test (and the layer
# walker's, before it calls it). The alternatives are grouped by their first character: a
# search tries them only after a "/" or a "." (twice as fast as one flat alternation).
CANDIDATE = re.compile(
    r"/(?:usr/local/cuda|opt/rocm|torch/version\.py$|conda-meta/|var/lib/rpm/"
    r"|usr/lib/sysimage/rpm/|var/lib/dpkg/status(?:$|\.d/)|nvidia/cu\d"
    r"|bin/(?:ptxas|nvdisasm|cuobjdump|nvlink|fatbinary)|build_and_package_info\.py$"
    r"|platform/build_info\.py$|paddle/version/__init__\.py$)"
    r"|\.(?:dist-info|egg-info|so\.\d|libs/|so$)|" + CONFIG_FILE.pattern)
_DPKG_STATUS = re.compile(r"^/var/lib/dpkg/status(?:\.d/[^/]+)?$")
# CUDA 13 wheels put their libraries under site-packages/nvidia/cu13/ (the major only).
_NVIDIA_WHEEL_TREE = re.compile(r"^(.*/nvidia/cu(\d+))(?:/|$)")
_CUDA_TREE = re.compile(rf"^{CUDA_ROOT}(?:/|$)")
_ROCM_TREE = re.compile(rf"{ROCM_INSTALL.pattern}|^/opt/rocm/core-(\d+\.\d+)(?:/|$)")
# Compiler tools and profiling libraries a package may keep for itself (triton's ptxas and
# CUPTI): a private toolchain, unless the image loads it as its runtime.
_PRIVATE_TOOL = re.compile(r"/bin/(ptxas|nvdisasm|cuobjdump|nvlink|fatbinary)(?:-[a-z0-9]+)?$")
_SHARED_OBJECT = re.compile(r"\.so(?:\.\d+)*$")
_RPMDB = re.compile(r"^/(?:var/lib/rpm|usr/lib/sysimage/rpm)/rpmdb\.sqlite(-wal)?$")


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
        if not CANDIDATE.search(path):
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
            dist = DIST_INFO.match(path)
            if dist and self._once(dist.group(1)):
                found = wheel_evidence(dist.group(1), dist.group(2), dist.group(3))
                if found:
                    self.evidence.append(found)
            if regular and RECORD.match(path):
                return WANT_MEMORY if self._limit(path, size, RECORD_LIMIT) else WANT_NONE
            return WANT_NONE
        if ".egg-info" in path:
            egg = EGG_INFO.match(path)
            if egg and self._once(egg.group(1)):
                found = wheel_evidence(egg.group(1), egg.group(2), egg.group(3))
                if found:
                    self.evidence.append(found)
            return WANT_NONE
        if kind in ("1", "2"):
            library = LIBRARY.search(path)
            if library and "." in (library.group("version") or "") \
                    and not names_its_target(library, link):
                how = "symbolic" if kind == "2" else "hard"
                self._library(path, library, size, f"a {how} link to {link}", regular=False)
            return WANT_NONE
        if not regular:
            return WANT_NONE
        if is_version_file(path):
            return WANT_MEMORY if self._limit(path, size, SMALL_FILE_LIMIT) else WANT_NONE
        if _DPKG_STATUS.match(path):
            return WANT_MEMORY if self._limit(path, size, DPKG_STATUS_LIMIT) else WANT_NONE
        if CONFIG_FILE.search(path):
            return WANT_MEMORY if self._limit(path, size, SMALL_FILE_LIMIT) else WANT_NONE
        if _RPMDB.match(path):
            return WANT_FILE if self._spool(path, size) else WANT_NONE
        tool = _PRIVATE_TOOL.search(path)
        package = SITE_PACKAGE.match(path)
        if tool and package and package.group(2) != "nvidia":
            self.evidence.append(Evidence(
                PRIVATE_TOOLCHAIN, path, "cuda", tool.group(1), "",
                detail=f"a copy of NVIDIA's {tool.group(1)} that {package.group(2)} keeps "
                       "for itself"))
            return WANT_NONE
        library = LIBRARY.search(path)
        if library:
            want = self._library(path, library, size, None, regular=True)
            # a toolkit library named for what it is still carries device code to read
            return WANT_PREFIX if want == WANT_NONE and size else want
        if _SHARED_OBJECT.search(path):
            return self._shared_object(path, package, size)
        conda = CONDA_META.search(path)
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
        version), and to its end for the device code it carries (READ(n): at most n more
        bytes, none only at its end; what is left unread, the walker skips: SKIP is not
        needed, every byte is fed to the device-code reader)."""
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
        while len(reader.head) < len(_ELF_MAGIC) and read_fed(len(_ELF_MAGIC)
                                                             - len(reader.head)):
            pass
        if reader.head != _ELF_MAGIC:
            return  # not ELF (a linker script): no device code; the walker skips the rest
        while read_fed(1 << 20):
            pass
        self._device_code(path, reader)

    def _device_code(self, path: str, reader: DeviceCodeReader) -> None:
        code, hazards = device_code_evidence(path, reader.finish())
        self.hazards.extend(hazards)
        if code is not None:
            self.device_code.append(code)

    def _by_soname(self, path: str, entries: Optional[DynamicEntries],
                   data: Optional[bytes]) -> None:
        """A library named without a version (libamdhip64.so, a vendored libcudart.so) is
        judged as its versioned twin, the file its SONAME names, would be (DATA: its bytes,
        when read whole)."""
        library, size = self._sonames.pop(path)
        soname = entries.soname if entries is not None else None
        version = soname_version(library.group("stem"), soname)
        if version:
            library = LIBRARY.search(f"{path}.{version}") or library
        want = self._library(path, library, size, f"its SONAME is {soname}" if version
                             else None, regular=True, by_soname=True)
        if want == WANT_MEMORY and data is not None:
            self.content(path, data)

    def _library(self, path: str, library: re.Match[str], size: int, link: Optional[str],
                 regular: bool, by_soname: bool = False) -> int:
        evidence, read = library_evidence(path, library, size, link, regular, by_soname,
                                          runtime_readable=size <= ELF_LIMIT)
        if evidence is not None:
            self.evidence.append(evidence)
        if read in (READ_SONAME, READ_SONAME_WHOLE):
            self._sonames[path] = (library, size)
            return WANT_MEMORY if read == READ_SONAME_WHOLE else WANT_PREFIX
        if read == READ_RUNTIME:
            self._runtimes[path] = library.group("version") or ""
            self.content_paths.append(path)
            return WANT_MEMORY
        if read == READ_SHARED_OBJECT:
            return self._shared_object(path, SITE_PACKAGE.match(path), size)
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
        record = RECORD.match(path)
        if record:
            self._records.setdefault(record.group(1), []).append(
                (distribution_label(record.group(2), record.group(3)), data))
            return
        text = data.decode("utf-8", "replace")
        if CONFIG_FILE.search(path):
            settings, problem = settings_from_text(path, text, path.endswith(".toml"))
            self.index_settings.extend(settings)
            if problem:
                self.hazards.append(Hazard(UNPARSABLE, path, problem, severe=False))
        elif (read := version_file_evidence(path, text)) is not None:
            found, hazard = read
            self.evidence.extend(found)
            if hazard is not None:
                self.hazards.append(hazard)
        elif _DPKG_STATUS.match(path):
            self.evidence.extend(dpkg_evidence(path, text))

    def _runtime(self, path: str, data: bytes) -> None:
        """A CUDA runtime whose name gives its major at most: its release is in its code."""
        evidence, hazard = runtime_evidence(path, data, self._runtimes.pop(path))
        if hazard is not None:
            self.hazards.append(hazard)
        self.evidence.append(evidence)

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
            found, hazard = rpm_evidence(path, db, wal)
            self.evidence.extend(found)
            if hazard is not None:
                self.hazards.append(hazard)

    def finish(self) -> tuple[list[Evidence], list[str], list[Hazard]]:
        self._rpm()
        self.evidence = backend_evidence(self.evidence, self._backends)
        attribute(self._records, self.evidence, self.device_code)
        return self.evidence, self.content_paths, self.hazards
