"""What toolkit version files and frameworks' build records say, read whole.

A CUDA tree's `version.json` (or the older `version.txt`), a ROCm tree's `.info/version`;
the CUDA or HIP release PyTorch (`torch/version.py`), ONNX Runtime, TensorFlow and Paddle
record they were compiled with.
"""

from __future__ import annotations

import json
import re
from typing import Optional

from ..patterns import lazy
from ..toolkit.spellings import ROCM_ROOT
from .config_env import major_minor
from .distributions import SITE_PACKAGE
from .results import UNPARSABLE, Evidence, Hazard

_CUDA_VERSION_FILE = lazy(r"^/usr/local/cuda(?:-\d+\.\d+)?/version\.(json|txt)$")
_ROCM_VERSION_FILE = lazy(rf"^(?:/opt/rocm|{ROCM_ROOT})/\.info/version$")
# Build records of frameworks: which CUDA they were compiled with.
BUILD_INFO = lazy(
    r"/(?:onnxruntime/capi/build_and_package_info\.py|tensorflow/python/platform/build_info\.py"
    r"|paddle/version/__init__\.py)$")
# `cuda_version = '13.0'` (ONNX Runtime), `('cuda_version', '12.5.1')` (TensorFlow's
# OrderedDict), `'cuda_version': '12.6'`; `rocm_version`, `hip_version` alike.
BUILD_VERSION = lazy(
    r"""['"]?\b(cuda|rocm|hip)_version['"]?\s*[:=,]\s*['"](\d+\.\d+[\d.]*)['"]""")
TORCH_CUDA = lazy(r"^cuda\s*(?::[^=\n]*)?=\s*['\"](\d+\.\d+)", re.M)
TORCH_HIP = lazy(r"^hip\s*(?::[^=\n]*)?=\s*['\"](\d+\.\d+)", re.M)
CUDA_TXT = lazy(r"CUDA Version (\d+\.\d+[\d.]*)")


def is_version_file(path: str) -> bool:
    """Whether PATH is a version file or build record this module reads."""
    return bool(_CUDA_VERSION_FILE.match(path) or _ROCM_VERSION_FILE.match(path)
                or path.endswith("/torch/version.py") or BUILD_INFO.search(path))


def version_file_evidence(path: str, text: str
                          ) -> Optional[tuple[list[Evidence], Optional[Hazard]]]:
    """The evidence of the version file or build record at PATH, whose content is TEXT,
    with a hazard when it says nothing readable; None when PATH is neither."""
    found = []
    if path.endswith("/version.json"):
        try:
            version = str(json.loads(text)["cuda"]["version"])
        except (ValueError, KeyError, TypeError, RecursionError):
            return [], Hazard(UNPARSABLE, path, "no cuda.version", severe=False)
        found.append(Evidence("version-file", path, "cuda", "toolkit", version,
                              major_minor(version)))
    elif path.endswith("/version.txt"):
        match = CUDA_TXT.search(text)
        if match:
            found.append(Evidence("version-file", path, "cuda", "toolkit",
                                  match.group(1), major_minor(match.group(1))))
    elif path.endswith("/.info/version"):
        version = text.strip().split("-")[0]
        found.append(Evidence("version-file", path, "rocm", "toolkit", version,
                              major_minor(version)))
    elif path.endswith("/torch/version.py"):
        for pattern, toolkit in ((TORCH_CUDA, "cuda"), (TORCH_HIP, "rocm")):
            match = pattern.search(text)
            if match:
                found.append(Evidence("torch-version", path, toolkit, "torch",
                                      match.group(1), match.group(1), built=True))
    elif BUILD_INFO.search(path):
        package = SITE_PACKAGE.match(path)
        for key, version in dict(BUILD_VERSION.findall(text)).items():
            toolkit = "cuda" if key == "cuda" else "rocm"
            found.append(Evidence(
                "build-info", path, toolkit,
                package.group(2) if package else "framework", version,
                major_minor(version), built=True,
                detail=f"its build record says {key}_version {version}"))
    else:
        return None
    return found, None
