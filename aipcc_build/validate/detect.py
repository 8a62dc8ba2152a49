"""Where CUDA and ROCm versions hide inside a layer, and in the image config.

`LayerDetector` sees every tar entry's path; most are rejected by one regex search. Names
alone give most evidence (trees, versioned libraries under any name a packaging tool gives
them, links named like them, dist-info directories, conda-meta records); the content of a
few small files is read (version.json, the build records of frameworks such as
torch/version.py, the dpkg database: `/var/lib/dpkg/status` and distroless's
one-file-per-package `status.d/`, the RECORD of each installed distribution, to name the
distribution that brought a file), the code of a vendored CUDA runtime whose name gives
its major only (`elf.runtime_release`), and the rpmdb goes to a temporary file for sqlite.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Optional

from ..toolkit.components import built_for, is_cuda_component, library_component
from .config_env import major_minor
from .elf import runtime_release
from .index_config import CONFIG_FILE, CONFIG_FILE_SUFFIXES, settings_from_text
from .results import PRIVATE_TOOLCHAIN, UNPARSABLE, Evidence, Hazard, IndexSetting
from .rpmdb import RpmdbError, read_packages

WANT_NONE, WANT_MEMORY, WANT_FILE = 0, 1, 2
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
    "cuda-build",
)

# The tar walker's first filter, on raw name bytes (which lack the leading "/").
CANDIDATE_BYTES = re.compile(
    rb"usr/local/cuda|opt/rocm|\.dist-info|\.so\.\d|torch/version\.py$|conda-meta/"
    rb"|var/lib/rpm/|usr/lib/sysimage/rpm/|var/lib/dpkg/status(?:$|\.d/)|/nvidia/cu\d"
    rb"|\.libs/|cuda[^/]*\.so$|/bin/(?:ptxas|nvdisasm|cuobjdump|nvlink|fatbinary)"
    rb"|/build_and_package_info\.py$|/platform/build_info\.py$|/paddle/version/__init__\.py$")
# ... and pip's and uv's config files, by an endswith (cheaper than one more alternative).
CANDIDATE_SUFFIXES = CONFIG_FILE_SUFFIXES
_CANDIDATE = re.compile(
    r"/usr/local/cuda|/opt/rocm|\.dist-info|\.so\.\d|/torch/version\.py$|/conda-meta/"
    r"|/var/lib/rpm/|/usr/lib/sysimage/rpm/|/var/lib/dpkg/status(?:$|\.d/)|/nvidia/cu\d"
    r"|\.libs/|cuda[^/]*\.so$|/bin/(?:ptxas|nvdisasm|cuobjdump|nvlink|fatbinary)"
    r"|/build_and_package_info\.py$|/platform/build_info\.py$|/paddle/version/__init__\.py$|"
    + CONFIG_FILE.pattern)
_DPKG_STATUS = re.compile(r"^/var/lib/dpkg/status(?:\.d/[^/]+)?$")
# CUDA 13 wheels put their libraries under site-packages/nvidia/cu13/ (the major only).
_NVIDIA_WHEEL_TREE = re.compile(r"^(.*/nvidia/cu(\d+))(?:/|$)")
_CUDA_TREE = re.compile(r"^/usr/local/cuda-(\d+\.\d+)(?:/|$)")
_CUDA_VERSION_FILE = re.compile(r"^/usr/local/cuda(?:-\d+\.\d+)?/version\.(json|txt)$")
_ROCM_TREE = re.compile(r"^/opt/rocm-(\d+\.\d+\.\d+)(?:/|$)|^/opt/rocm/core-(\d+\.\d+)(?:/|$)")
_ROCM_VERSION_FILE = re.compile(r"^/opt/rocm(?:-[\d.]+)?/\.info/version$")
# A shared library under any name a packaging tool gives it: libcudart.so.12.8.90,
# auditwheel's libcudart-53d54daa.so.12.6.68 and libcudart.45e7f3ed.so.12.
_LIBRARY = re.compile(
    r"/lib(?P<stem>[A-Za-z0-9_+-]+?)(?:[-.](?P<hash>[0-9a-f]{8}))?\.so(?:\.(?P<version>\d+(?:\.\d+)*))?$")
_DIST_INFO = re.compile(r"^(.*/([^/]+)-([^/-]+)\.dist-info)(?:/|$)")
# An installed distribution's file list, and the directory its paths are relative to.
_RECORD = re.compile(r"^(.*/(?:site|dist)-packages)/([^/]+)-([^/-]+)\.dist-info/RECORD$")
# The package a file of site-packages belongs to: "triton", "torchvision.libs".
_SITE_PACKAGE = re.compile(r"^(.*/(?:site|dist)-packages)/([^/]+)/")
# Compiler tools and profiling libraries a package may keep for itself (triton's ptxas and
# CUPTI): a private toolchain, unless the image loads it as its runtime.
_PRIVATE_TOOL = re.compile(r"/bin/(ptxas|nvdisasm|cuobjdump|nvlink|fatbinary)(?:-[a-z0-9]+)?$")
_TOOLCHAIN_COMPONENTS = frozenset({"cuda-cupti"})
# A shared object named for CUDA (libonnxruntime_providers_cuda.so, libtorch_cuda.so,
# libbitsandbytes_cuda128.so): a CUDA build of its package, whatever it links.
_CUDA_BUILD = re.compile(r"/[^/]*(?:^|[_.-])cuda(?:\d*)(?:[_.-][^/]*)?\.so(?:\.\d+)*$")
# Build records of frameworks: which CUDA they were compiled with.
_BUILD_INFO = re.compile(
    r"/(?:onnxruntime/capi/build_and_package_info\.py|tensorflow/python/platform/build_info\.py"
    r"|paddle/version/__init__\.py)$")
_BUILD_CUDA = re.compile(r"""['"]?\bcuda_version['"]?\s*[:=]\s*['"](\d+\.\d+[\d.]*)['"]""")
_RPMDB = re.compile(r"^/(?:var/lib/rpm|usr/lib/sysimage/rpm)/rpmdb\.sqlite(-wal)?$")
_CONDA_META = re.compile(r"/conda-meta/([^/]+)\.json$")
_TORCH_CUDA = re.compile(r"^cuda\s*(?::[^=\n]*)?=\s*['\"](\d+\.\d+)", re.M)
_TORCH_HIP = re.compile(r"^hip\s*(?::[^=\n]*)?=\s*['\"](\d+\.\d+)", re.M)
_CUDA_TXT = re.compile(r"CUDA Version (\d+\.\d+[\d.]*)")
_LOCAL_CUDA = re.compile(r"^cu(\d+)(\d)$")  # "+cu129" -> 12.9, "+cu118" -> 11.8
_LOCAL_ROCM = re.compile(r"^rocm(\d+\.\d+)")
_NVIDIA_WHEEL = re.compile(r"^nvidia-(.+?)(?:-cu(\d+))?$")
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
                        f"{int(cuda.group(1))}.{cuda.group(2)}", distribution=label,
                        detail=f"its local version +{local} names the CUDA build", built=True)
    rocm = _LOCAL_ROCM.match(local)
    if rocm:
        return Evidence("dist-info", path, "rocm", project, version, rocm.group(1),
                        distribution=label)
    base, build = built_for(project)
    if build:
        return Evidence("dist-info", path, "cuda", project, version, build, distribution=label,
                        detail=f"its name says it is built for CUDA {build}", built=True)
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


# One line each, trimmed in Python: a lazy value before `\s*$` backtracks quadratically on
# a line of blanks that does not end in them.
_DPKG_FIELD = re.compile(r"^(Package|Version|Status|Source|Architecture):[ \t]*([^\n]*)", re.M)


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
        fields = {key: value.strip() for key, value in _DPKG_FIELD.findall(paragraph)}
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
            return self._library(path, library, size, None, regular=True)
        self._cuda_build(path, package, "")
        conda = _CONDA_META.search(path)
        if conda:
            found = conda_evidence(path, conda.group(1))
            if found:
                self.evidence.append(found)
        return WANT_NONE

    def _cuda_build(self, path: str, package: Optional[re.Match[str]], version: str) -> None:
        """A package's shared object named for CUDA (libtorch_cuda.so)."""
        if package and _CUDA_BUILD.search(path):
            self.evidence.append(Evidence(
                "cuda-build", path, "cuda", package.group(2), version,
                detail="a shared object named for CUDA: a CUDA build of its package"))

    def _library(self, path: str, library: re.Match[str], size: int, link: Optional[str],
                 regular: bool) -> int:
        stem, version = library.group("stem"), library.group("version") or ""
        if stem == "amdhip64":
            if "." in version:
                self.evidence.append(Evidence("library", path, "rocm", "hip", version,
                                              major_minor(version), detail=link))
            return WANT_NONE
        component = library_component(stem)
        package = _SITE_PACKAGE.match(path)
        if component is None:
            self._cuda_build(path, package, version)
            return WANT_NONE
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
        self.evidence.append(Evidence(
            "library", path, "cuda", component, version, version or None,
            detail=f"{detail or 'a library'}; its name gives "
                   + (f"CUDA {version} only" if version else "no version")))
        return WANT_NONE

    def content(self, path: str, data: bytes) -> None:
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
                                                  match.group(1), match.group(1),
                                                  built=toolkit == "cuda"))
        elif _BUILD_INFO.search(path):
            match = _BUILD_CUDA.search(text)
            package = _SITE_PACKAGE.match(path)
            if match:
                self.evidence.append(Evidence(
                    "build-info", path, "cuda", package.group(2) if package else "framework",
                    match.group(1), major_minor(match.group(1)), built=True,
                    detail=f"its build record says cuda_version {match.group(1)}"))
        elif _DPKG_STATUS.match(path):
            for name, version, source in dpkg_packages(
                    text, installed_by_default=path != "/var/lib/dpkg/status"):
                found = package_evidence("dpkg", path, name, version, source)
                if found:
                    self.evidence.append(found)

    def _runtime(self, path: str, data: bytes) -> None:
        """A CUDA runtime whose name gives its major at most: its release is in its code."""
        major = self._runtimes.pop(path)
        release = runtime_release(data)
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
        self._attribute()
        return self.evidence, self.content_paths, self.hazards
