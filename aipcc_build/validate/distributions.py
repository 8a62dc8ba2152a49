"""What installed Python distributions say: wheels' `.dist-info` and setuptools'
`.egg-info` names, conda's `conda-meta` records, and the RECORD files that name the
distribution each installed file came from.

NVIDIA's wheels name their component (`nvidia-cublas-cu12`); other projects name the CUDA
build in the project (`cupy-cuda12x`, `jax-cuda12-plugin`) or in a `+cu126` / `+rocm6.4`
local version; conda records carry the release in the build string.
"""

from __future__ import annotations

import re
from typing import Optional

from ..patterns import lazy
from ..records import replace
from ..toolkit.components import built_for, is_cuda_component
from ..toolkit.spellings import CU_TAG, cu_release
from .builds import distribution_evidence
from .config_env import major_minor
from .results import DeviceCode, Evidence

DIST_INFO = lazy(r"^(.*/([^/]+)-([^/-]+)\.dist-info)(?:/|$)")
# What setuptools and distutils install instead (`setup.py install`, old pip): a directory
# or a single PKG-INFO file named NAME-VERSION[-pyX.Y[-PLATFORM]].egg-info.
EGG_INFO = lazy(r"^(.*/([^/-]+)-([^/-]+)(?:-[^/]*)?\.egg-info)(?:/|$)")
# An installed distribution's file list, and the directory its paths are relative to.
RECORD = lazy(r"^(.*/(?:site|dist)-packages)/([^/]+)-([^/-]+)\.dist-info/RECORD$")
# The package a file of site-packages belongs to: "triton", "torchvision.libs".
SITE_PACKAGE = lazy(r"^(.*/(?:site|dist)-packages)/([^/]+)/")
CONDA_META = lazy(r"/conda-meta/([^/]+)\.json$")
_LOCAL_CUDA = lazy(rf"^{CU_TAG}$")  # "+cu129" -> 12.9, "+cu118" -> 11.8
_NVIDIA_WHEEL = lazy(r"^nvidia-(.+?)(?:-cu(\d+))?$")
# conda package names and their component; their versions are the component's own.
_CONDA_CUDA = {
    "cuda-cudart": "cuda-runtime", "cuda-nvrtc": "cuda-nvrtc", "cuda-cupti": "cuda-cupti",
    "cuda-nvtx": "nvtx", "libcublas": "cublas", "libcufft": "cufft", "libcurand": "curand",
    "libcusolver": "cusolver", "libcusparse": "cusparse", "libnvjitlink": "nvjitlink",
    "libcufile": "cufile", "libnpp": "npp", "nccl": "nccl", "cudnn": "cudnn",
}

def distribution_label(name: str, version: str) -> str:
    """How a distribution is named in evidence: "nvidia-cublas-cu12 12.8.4.1"."""
    return f"{name.lower().replace('_', '-')} {version}"


def wheel_evidence(path: str, name: str, version: str) -> Optional[Evidence]:
    """Evidence from a dist-info directory name: NVIDIA wheels, a CUDA build named in the
    project (-cu126, cupy-cuda12x, jax-cuda12-plugin) or a +cu/+rocm local version."""
    project = name.lower().replace("_", "-").replace(".", "-")
    local = version.partition("+")[2]
    label = distribution_label(name, version)
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


def attribute(records: dict[str, list[tuple[str, bytes]]], evidence: list[Evidence],
              device_code: list[DeviceCode]) -> None:
    """Name, in place, the distribution whose RECORD lists each piece of EVIDENCE's file
    and each shared object's DEVICE_CODE (RECORDS: each site-packages directory's RECORDs,
    with their distributions' labels)."""
    if not records:
        return
    indexed: dict[str, dict[bytes, str]] = {}

    def owners(site: str) -> dict[bytes, str]:
        """The files the RECORDs of SITE list, each with its distribution (the first
        RECORD to list it): one pass over each RECORD, however much evidence."""
        if site not in indexed:
            found: dict[bytes, str] = {}
            for label, record in records[site]:
                for line in record.split(b"\n"):
                    found.setdefault(line.split(b",", 1)[0], label)
            indexed[site] = found
        return indexed[site]

    for number, piece in enumerate(evidence):
        site = SITE_PACKAGE.match(piece.path)
        if piece.distribution or not site or site.group(1) not in records:
            continue
        relative = piece.path[len(site.group(1)) + 1:].encode()
        label = owners(site.group(1)).get(relative)
        if label is not None:
            evidence[number] = replace(piece, distribution=label)
    for number, code in enumerate(device_code):
        site = SITE_PACKAGE.match(code.path)
        if site and site.group(1) in records:
            label = owners(site.group(1)).get(code.path[len(site.group(1)) + 1:].encode())
            device_code[number] = replace(code, distribution=label)
