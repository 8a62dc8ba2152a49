"""Where CUDA and ROCm versions hide inside a layer, and in the image config.

`LayerDetector` sees every tar entry's path; most are rejected by one regex search. Names
alone give most evidence (trees, versioned libraries, dist-info directories, conda-meta
records); the content of a few small files is read (version.json, torch/version.py, the
dpkg database: `/var/lib/dpkg/status` and distroless's one-file-per-package `status.d/`)
and the rpmdb goes to a temporary file for sqlite.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

from .components import is_cuda_component
from .config_env import major_minor
from .index_config import CONFIG_FILE, CONFIG_FILE_SUFFIXES, settings_from_text
from .results import UNPARSABLE, Evidence, Hazard, IndexSetting
from .rpmdb import RpmdbError, read_packages

WANT_NONE, WANT_MEMORY, WANT_FILE = 0, 1, 2
SMALL_FILE_LIMIT = 1 << 20  # version.json, version.py and friends are a few hundred bytes
DPKG_STATUS_LIMIT = 64 << 20
# RPM databases are copied to temporary files for sqlite: at most this many bytes at once
# per layer scan (a layer repeating a database, or holding huge ones, is refused instead).
SPOOL_LIMIT = 1 << 30

# Evidence kinds, as reported.
EVIDENCE_KINDS = (
    "cuda-tree", "rocm-tree", "version-file", "library", "rpm", "dpkg", "dist-info",
    "torch-version", "conda", "env", "symlink",
)

# The tar walker's first filter, on raw name bytes (which lack the leading "/").
CANDIDATE_BYTES = re.compile(
    rb"usr/local/cuda|opt/rocm|\.dist-info|\.so\.\d|torch/version\.py$|conda-meta/"
    rb"|var/lib/rpm/|usr/lib/sysimage/rpm/|var/lib/dpkg/status(?:$|\.d/)|/nvidia/cu\d")
# ... and pip's and uv's config files, by an endswith (cheaper than one more alternative).
CANDIDATE_SUFFIXES = CONFIG_FILE_SUFFIXES
_CANDIDATE = re.compile(
    r"/usr/local/cuda|/opt/rocm|\.dist-info|\.so\.\d|/torch/version\.py$|/conda-meta/"
    r"|/var/lib/rpm/|/usr/lib/sysimage/rpm/|/var/lib/dpkg/status(?:$|\.d/)|/nvidia/cu\d|"
    + CONFIG_FILE.pattern)
_DPKG_STATUS = re.compile(r"^/var/lib/dpkg/status(?:\.d/[^/]+)?$")
# CUDA 13 wheels put their libraries under site-packages/nvidia/cu13/ (the major only).
_NVIDIA_WHEEL_TREE = re.compile(r"^(.*/nvidia/cu(\d+))(?:/|$)")
_CUDA_TREE = re.compile(r"^/usr/local/cuda-(\d+\.\d+)(?:/|$)")
_CUDA_VERSION_FILE = re.compile(r"^/usr/local/cuda(?:-\d+\.\d+)?/version\.(json|txt)$")
_ROCM_TREE = re.compile(r"^/opt/rocm-(\d+\.\d+\.\d+)(?:/|$)|^/opt/rocm/core-(\d+\.\d+)(?:/|$)")
_ROCM_VERSION_FILE = re.compile(r"^/opt/rocm(?:-[\d.]+)?/\.info/version$")
_LIBRARY = re.compile(r"/lib([A-Za-z0-9_+-]+?)\.so\.(\d+(?:\.\d+)+)$")
_DIST_INFO = re.compile(r"^(.*/([^/]+)-([^/-]+)\.dist-info)(?:/|$)")
_RPMDB = re.compile(r"^/(?:var/lib/rpm|usr/lib/sysimage/rpm)/rpmdb\.sqlite(-wal)?$")
_CONDA_META = re.compile(r"/conda-meta/([^/]+)\.json$")
_TORCH_CUDA = re.compile(r"^cuda\s*(?::[^=\n]*)?=\s*['\"](\d+\.\d+)", re.M)
_TORCH_HIP = re.compile(r"^hip\s*(?::[^=\n]*)?=\s*['\"](\d+\.\d+)", re.M)
_CUDA_TXT = re.compile(r"CUDA Version (\d+\.\d+[\d.]*)")
_LOCAL_CUDA = re.compile(r"^cu(\d+)(\d)$")  # "+cu129" -> 12.9, "+cu118" -> 11.8
_LOCAL_ROCM = re.compile(r"^rocm(\d+\.\d+)")
_NVIDIA_WHEEL = re.compile(r"^nvidia-(.+?)(?:-cu(\d+))?$")
# CuPy names the CUDA major only (cupy-cuda12x), older wheels major and minor (cupy-cuda117).
_CUPY_MAJOR = re.compile(r"^cupy-cuda(\d+)x$")
_CUPY_MINOR = re.compile(r"^cupy-cuda(\d+)(\d)$")
# Package names that carry the CUDA release: cuda-cudart-12-9, libcublas-12-9, cuda-12-8.
_CUDA_PACKAGE = re.compile(
    r"^(cuda|cuda-[a-z0-9_-]+?|lib(?:cu|npp|nv)[a-z0-9_-]*?)-(\d{2})-(\d{1,2})$")
_CUDNN_PACKAGE = re.compile(r"^libcudnn\d+(?:-[a-z]+)*-cuda-(\d+)$")
_NCCL_PACKAGE = re.compile(r"^(?:lib)?nccl\d*(?:-devel|-dev)?$")
_NCCL_CUDA = re.compile(r"\+cuda(\d+\.\d+)")
# Debian's own CUDA packages (source package nvidia-cuda-toolkit, non-free): the library
# SONAME is in the name (libcudart11.0, libcublas11), the CUDA release in the version after
# the "~": libcudart11.0 11.8.89~11.8.0-5~deb12u1 is CUDA 11.8.0.
_DEBIAN_CUDA_SOURCE = "nvidia-cuda-toolkit"
_DEBIAN_CUDA_PACKAGE = re.compile(
    r"^(?:lib(?:cudart|cublas|cublaslt|cufft|cufftw|curand|cusolver|cusolvermg|cusparse"
    r"|nvrtc|nvrtc-builtins|cupti|nvtoolsext|nvjitlink|npp[a-z]*|nvblas|cuinj64|accinj64)"
    r"[\d.-]*|nvidia-cuda-(?:toolkit|dev|gdb))$")
_ROCM_PACKAGE = re.compile(
    r"^(rocm-core|hip-runtime-amd|rocm-hip-runtime|hip-devel|rocm-dev|rocm-libs)"
    r"(\d+\.\d+\.\d+)?$")
_ROCM_CODE = re.compile(r"(?<![\d])(\d)(\d\d)(\d\d)(?![\d])")  # 60401 -> 6.4.1

# Library file stems and the component each belongs to.
_CUDA_LIBRARIES = {
    "cudart": "cuda-runtime", "cublas": "cublas", "cublasLt": "cublas", "cufft": "cufft",
    "cufftw": "cufft", "curand": "curand", "cusolver": "cusolver", "cusolverMg": "cusolver",
    "cusparse": "cusparse", "nvrtc": "cuda-nvrtc", "nvrtc-builtins": "cuda-nvrtc",
    "cupti": "cuda-cupti", "nvToolsExt": "nvtx", "nvJitLink": "nvjitlink", "cufile": "cufile",
    "nvjpeg": "nvjpeg", "cudnn": "cudnn", "nccl": "nccl", "cusparseLt": "cusparselt",
}
# conda package names and their component; their versions are the component's own.
_CONDA_CUDA = {
    "cuda-cudart": "cuda-runtime", "cuda-nvrtc": "cuda-nvrtc", "cuda-cupti": "cuda-cupti",
    "cuda-nvtx": "nvtx", "libcublas": "cublas", "libcufft": "cufft", "libcurand": "curand",
    "libcusolver": "cusolver", "libcusparse": "cusparse", "libnvjitlink": "nvjitlink",
    "libcufile": "cufile", "libnpp": "npp", "nccl": "nccl", "cudnn": "cudnn",
}


def rocm_release(version: str) -> Optional[str]:
    """ROCm release of a package version: AMD appends a code like 60401 for 6.4.1."""
    codes = _ROCM_CODE.findall(version)
    if codes:
        major, minor, _ = codes[-1]
        return f"{int(major)}.{int(minor)}"
    return major_minor(version)


def debian_cuda_release(version: str) -> Optional[str]:
    """CUDA release of a Debian nvidia-cuda-toolkit package version.

    "11.8.89~11.8.0-5~deb12u1" -> "11.8" (the toolkit release follows the component's own
    version after a "~"); "11.8.0-5~deb12u1" (nvidia-cuda-toolkit itself) -> "11.8".
    """
    upstream = version.split(":", 1)[-1].rsplit("-", 1)[0]
    head, _, toolkit = upstream.partition("~")
    return major_minor(toolkit) or major_minor(head)


def package_evidence(kind: str, path: str, name: str, version: str,
                     source: str = "") -> Optional[Evidence]:
    """Evidence from an installed package (rpm, dpkg): its name or version names a release.

    NVIDIA's packages (RPM and Debian/Ubuntu alike) carry the release in the name
    (cuda-cudart-12-8, libcublas-12-8), or in the version (libnccl2 2.27.3-1+cuda12.8), or
    the major in the name (libcudnn9-cuda-12). Debian's own packages carry it in the version.
    """
    match = _CUDA_PACKAGE.match(name)
    if match:
        return Evidence(kind, path, "cuda", name, version, f"{match.group(2)}.{match.group(3)}")
    match = _CUDNN_PACKAGE.match(name)
    if match:
        return Evidence(kind, path, "cuda", name, version, match.group(1))
    if _NCCL_PACKAGE.match(name):
        built_for = _NCCL_CUDA.search(version)
        return Evidence(kind, path, "cuda", "nccl", version,
                        built_for.group(1) if built_for else None)
    match = _ROCM_PACKAGE.match(name)
    if match:
        return Evidence(kind, path, "rocm", match.group(1), version,
                        major_minor(match.group(2)) if match.group(2) else rocm_release(version))
    if source.split(" ")[0] == _DEBIAN_CUDA_SOURCE or _DEBIAN_CUDA_PACKAGE.match(name):
        return Evidence(kind, path, "cuda", name, version, debian_cuda_release(version))
    return None


def _interesting_package(name: str) -> bool:
    return bool(_CUDA_PACKAGE.match(name) or _CUDNN_PACKAGE.match(name)
                or _NCCL_PACKAGE.match(name) or _ROCM_PACKAGE.match(name))


def wheel_evidence(path: str, name: str, version: str) -> Optional[Evidence]:
    """Evidence from a dist-info directory name: NVIDIA wheels, or a +cu/+rocm local version."""
    project = name.lower().replace("_", "-").replace(".", "-")
    local = version.partition("+")[2]
    cupy = _CUPY_MAJOR.match(project)
    if cupy:
        return Evidence("dist-info", path, "cuda", project, version, cupy.group(1))
    cupy = _CUPY_MINOR.match(project)
    if cupy:
        return Evidence("dist-info", path, "cuda", project, version,
                        f"{cupy.group(1)}.{cupy.group(2)}")
    match = _NVIDIA_WHEEL.match(project)
    if match and not local:
        # CUDA 13 wheels drop the -cuNN suffix: a known component name is enough. The
        # release comes from the component table at verdict time.
        # The component keeps its -cuNN suffix: it pins the CUDA major.
        component = project[len("nvidia-"):]
        if match.group(2) or is_cuda_component(component):
            return Evidence("dist-info", path, "cuda", component, version)
        return None
    cuda = _LOCAL_CUDA.match(local)
    if cuda:
        return Evidence("dist-info", path, "cuda", project, version,
                        f"{int(cuda.group(1))}.{cuda.group(2)}")
    rocm = _LOCAL_ROCM.match(local)
    if rocm:
        return Evidence("dist-info", path, "rocm", project, version, rocm.group(1))
    return None


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


_DPKG_FIELD = re.compile(r"^(Package|Version|Status|Source|Architecture): *(.*?)\s*$", re.M)


def dpkg_packages(text: str, installed_by_default: bool = False
                  ) -> list[tuple[str, str, str]]:
    """(package, version, source) of each installed package in a dpkg status text.

    Paragraphs are RFC-822 style, separated by blank lines; only `Status: install ok
    installed` counts (removed packages keep "deinstall ok config-files"). Distroless's
    status.d files may omit Status: INSTALLED_BY_DEFAULT says a file there is installed.
    A Source field may carry its own version ("nvidia-cuda-toolkit (11.8.0-5)").
    """
    found = []
    for paragraph in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n")):
        fields = dict(_DPKG_FIELD.findall(paragraph))
        name = fields.get("Package", "")
        if not name:
            continue
        status = fields.get("Status")
        if status is None and not installed_by_default:
            continue
        if status is not None and status.split()[-1:] != ["installed"]:
            continue
        found.append((name, fields.get("Version", ""), fields.get("Source", "").split(" ")[0]))
    return found


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

    def visit(self, path: str, kind: str, size: int) -> int:
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
            return WANT_NONE
        if not regular:
            return WANT_NONE
        if _CUDA_VERSION_FILE.match(path) or _ROCM_VERSION_FILE.match(path) \
                or path.endswith("/torch/version.py"):
            return WANT_MEMORY if self._limit(path, size, SMALL_FILE_LIMIT) else WANT_NONE
        if _DPKG_STATUS.match(path):
            return WANT_MEMORY if self._limit(path, size, DPKG_STATUS_LIMIT) else WANT_NONE
        if CONFIG_FILE.search(path):
            return WANT_MEMORY if self._limit(path, size, SMALL_FILE_LIMIT) else WANT_NONE
        if _RPMDB.match(path):
            return WANT_FILE if self._spool(path, size) else WANT_NONE
        library = _LIBRARY.search(path)
        if library:
            self._library(path, library.group(1), library.group(2))
            return WANT_NONE
        conda = _CONDA_META.search(path)
        if conda:
            found = conda_evidence(path, conda.group(1))
            if found:
                self.evidence.append(found)
        return WANT_NONE

    def _library(self, path: str, stem: str, version: str) -> None:
        if stem == "amdhip64":
            self.evidence.append(Evidence("library", path, "rocm", "hip", version,
                                          major_minor(version)))
            return
        component = _CUDA_LIBRARIES.get(stem) or ("npp" if stem.startswith("npp") else None)
        if component:
            self.evidence.append(Evidence("library", path, "cuda", component, version))

    def content(self, path: str, data: bytes) -> None:
        text = data.decode("utf-8", "replace")
        if CONFIG_FILE.search(path):
            settings, problem = settings_from_text(path, text, path.endswith(".toml"))
            self.index_settings.extend(settings)
            if problem:
                self.hazards.append(Hazard(UNPARSABLE, path, problem, severe=False))
        elif path.endswith("/version.json"):
            try:
                version = str(json.loads(text)["cuda"]["version"])
            except (ValueError, KeyError, TypeError):
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
                                                  match.group(1), match.group(1)))
        elif _DPKG_STATUS.match(path):
            for name, version, source in dpkg_packages(
                    text, installed_by_default=path != "/var/lib/dpkg/status"):
                found = package_evidence("dpkg", path, name, version, source)
                if found:
                    self.evidence.append(found)

    def content_file(self, path: str, file: Path) -> None:
        self._rpm_files[path] = file

    def _rpm(self) -> None:
        for path, file in self._rpm_files.items():
            if path.endswith("-wal"):
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
                packages = read_packages(db, _interesting_package, wal)
            except RpmdbError as exc:
                self.hazards.append(Hazard("unreadable-rpmdb", path, str(exc), severe=False))
                continue
            for name, version, release in packages:
                found = package_evidence("rpm", path, name, f"{version}-{release}")
                if found:
                    self.evidence.append(found)

    def finish(self) -> tuple[list[Evidence], list[str], list[Hazard]]:
        self._rpm()
        return self.evidence, self.content_paths, self.hazards
