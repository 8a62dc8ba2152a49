"""What an installed package's name and version say: RPM and dpkg databases alike, and
the evidence of a dpkg status file or an RPM database read whole.

NVIDIA's packages (RPM and Debian/Ubuntu) carry the CUDA release in the name or the
version; AMD's carry their ROCm release code in the version (60401 is 6.4.1); Debian's own
CUDA packages (non-free) carry it after the last "~" of the upstream version, Debian's own
ROCm packages in the version.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from .config_env import major_minor
from .results import Evidence, Hazard
from .rpmdb import RpmdbError, read_packages

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
# Debian's own ROCm packages (main: libamdhip64-5 5.2.3-8, rocminfo, rocm-smi), versioned
# by the ROCm release; AMD's "TheRock" packages of ROCm 7 (amdrocm-*).
_OTHER_ROCM_PACKAGE = re.compile(
    r"^(?:libamdhip64-\d+|libhsa-runtime64-\d+|librocm-smi64-\d+|rocminfo|rocm-smi|hipcc"
    r"|amdrocm(?:-[a-z0-9-]+)?)$")
_ROCM_CODE = re.compile(r"(?<![\d])(\d)(\d\d)(\d\d)(?![\d])")  # 60401 -> 6.4.1


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
    version after the last "~" before the Debian revision:
    "11.1.1+~10.9.0.58~11.8.0-5~deb12u1", libcufft10, is CUDA 11.8 too);
    "11.8.0-5~deb12u1" (nvidia-cuda-toolkit itself) -> "11.8".
    """
    upstream = version.split(":", 1)[-1].rsplit("-", 1)[0]
    head, _, toolkit = upstream.rpartition("~")
    return major_minor(toolkit) if head else major_minor(upstream)


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
    if _OTHER_ROCM_PACKAGE.match(name):
        return Evidence(kind, path, "rocm", name, version, rocm_release(version))
    if source.split(" ")[0] == _DEBIAN_CUDA_SOURCE or _DEBIAN_CUDA_PACKAGE.match(name):
        return Evidence(kind, path, "cuda", name, version, debian_cuda_release(version))
    return None


def interesting_package(name: str) -> bool:
    return bool(_CUDA_PACKAGE.match(name) or _CUDNN_PACKAGE.match(name)
                or _NCCL_PACKAGE.match(name) or _ROCM_PACKAGE.match(name)
                or _OTHER_ROCM_PACKAGE.match(name))


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


def dpkg_evidence(path: str, text: str) -> list[Evidence]:
    """The evidence of the dpkg status file at PATH (`/var/lib/dpkg/status`, or one of
    distroless's `status.d/` files, whose packages are installed unless they say not)."""
    found = []
    for name, version, source in dpkg_packages(
            text, installed_by_default=path != "/var/lib/dpkg/status"):
        evidence = package_evidence("dpkg", path, name, version, source)
        if evidence:
            found.append(evidence)
    return found


def rpm_evidence(path: str, db: Path, wal: Optional[Path]
                 ) -> tuple[list[Evidence], Optional[Hazard]]:
    """The evidence of the RPM database at PATH, copied to DB (and its write-ahead log to
    WAL, beside it under its own name); a hazard instead when it cannot be read."""
    try:
        packages = read_packages(db, interesting_package, wal)
    except RpmdbError as exc:
        return [], Hazard("unreadable-rpmdb", path, str(exc), severe=False)
    found = []
    for name, version, release in packages:
        evidence = package_evidence("rpm", path, name, f"{version}-{release}")
        if evidence:
            found.append(evidence)
    return found, None
