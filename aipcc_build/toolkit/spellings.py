"""How toolkit releases are spelled in wheel versions, index URLs and install paths: one
reading for the detectors, the index checks and the verdict."""

from __future__ import annotations

from ..patterns import lazy

# PyTorch's CUDA tag, in a wheel's local version (`+cu129`) and an index path (`/whl/cu129`):
# cu129 is CUDA 12.9, cu118 CUDA 11.8 (the last digit is the minor). Groups: major, minor.
CU_TAG = r"cu(\d+)(\d)"
# Where NVIDIA's packages install a CUDA release and AMD's a ROCm one (/usr/local/cuda-12.9,
# /opt/rocm-6.4.1). Group 1: the release as the path spells it.
CUDA_ROOT = r"/usr/local/cuda-(\d+\.\d+)"
ROCM_ROOT = r"/opt/rocm-(\d+\.\d+\.\d+)"
# A path in such a ROCm install (its root or below): a search path, a member of a layer.
ROCM_INSTALL = lazy(rf"^{ROCM_ROOT}(?:/|$)")


def cu_release(major: str, minor: str) -> str:
    """The release a CU_TAG's groups name: ("12", "9") -> "12.9"."""
    return f"{int(major)}.{minor}"
