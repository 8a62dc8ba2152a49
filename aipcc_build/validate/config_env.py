"""Evidence in the image config's environment (CUDA_VERSION, NVIDIA_REQUIRE_CUDA, ...):
read on every validation, warm or cold, so it stays apart from the layer detectors in
`detect` (whose patterns would cost a warm validation their compilation)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Optional

from .results import Evidence


def major_minor(version: str) -> Optional[str]:
    match = re.match(r"(\d+)\.(\d+)", version)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def config_evidence(env: Mapping[str, str]) -> list[Evidence]:
    """Evidence from the image config's environment."""
    found = []
    for key in ("CUDA_VERSION", "NV_CUDA_LIB_VERSION"):
        if env.get(key):
            found.append(Evidence("env", f"config:Env/{key}", "cuda", "toolkit", env[key],
                                  major_minor(env[key])))
    if env.get("NV_CUDA_CUDART_VERSION"):
        value = env["NV_CUDA_CUDART_VERSION"]
        found.append(Evidence("env", "config:Env/NV_CUDA_CUDART_VERSION", "cuda",
                              "cuda-runtime", value, major_minor(value)))
    require = env.get("NVIDIA_REQUIRE_CUDA", "")
    # The literal first: compiling the pattern would cost every warm validation of an image
    # without the variable (issue 37).
    match = re.search(r"cuda>=(\d+\.\d+)", require) if "cuda>=" in require else None
    if match:
        found.append(Evidence("env", "config:Env/NVIDIA_REQUIRE_CUDA", "cuda", "driver-requirement",
                              require, match.group(1)))
    if env.get("ROCM_VERSION"):
        found.append(Evidence("env", "config:Env/ROCM_VERSION", "rocm", "toolkit",
                              env["ROCM_VERSION"], major_minor(env["ROCM_VERSION"])))
    return found
