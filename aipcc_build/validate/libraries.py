"""What a shared library's file name says: the CUDA component or HIP runtime it is, its
version, whether a package vendors it or keeps it as a private toolchain, and what more of
it must be read when its name says too little (its SONAME, or a vendored CUDA runtime's
code, which `elf` reads).
"""

from __future__ import annotations

import re
from typing import Optional

from ..patterns import lazy
from ..toolkit.components import OWN_SCHEME, library_component, scheme
from .config_env import major_minor
from .distributions import SITE_PACKAGE
from .results import PRIVATE_TOOLCHAIN, Evidence

# A shared library under any name a packaging tool gives it: libcudart.so.12.8.90,
# auditwheel's libcudart-53d54daa.so.12.6.68 and libcudart.45e7f3ed.so.12.
LIBRARY = lazy(
    r"/lib(?P<stem>[A-Za-z0-9_+-]+?)(?:[-.](?P<hash>[0-9a-f]{8}))?\.so(?:\.(?P<version>\d+(?:\.\d+)*))?$")
_TOOLCHAIN_COMPONENTS = frozenset({"cuda-cupti"})
# Libraries whose file version is their API's, not the CUDA release: NVTX's
# libnvToolsExt.so.1.0.0 ships alike in CUDA 11.8 and 12.x (its package names the release).
_API_NUMBERED = frozenset({"nvToolsExt"})

# What a library's name leaves to read: nothing, its SONAME from its start, its SONAME
# from its bytes read whole (a CUDA runtime's code may say its release), a vendored CUDA
# runtime's code, or what any shared object links (no toolkit library by its name).
READ_NOTHING, READ_SONAME, READ_SONAME_WHOLE, READ_RUNTIME, READ_SHARED_OBJECT = range(5)


def names_its_target(library: re.Match[str], target: str) -> bool:
    """Whether a link named LIBRARY only shortens the name of its TARGET, the same
    library with a longer version (libcudart.so.11.0 -> libcudart.so.11.8.89): the target
    is judged by its own name. A link whose name claims more than its target's name
    (libcudart.so.12.9.79 -> libfoo.so, or -> libcudart.so.12.8.90) is judged by its name."""
    named = LIBRARY.search("/" + target.rsplit("/", 1)[-1])
    if named is None or named.group("stem") != library.group("stem"):
        return False
    ours, theirs = library.group("version").split("."), (named.group("version") or "").split(".")
    return len(ours) < len(theirs) and theirs[0] == ours[0]


def library_evidence(path: str, library: re.Match[str], size: int, link: Optional[str],
                     regular: bool, by_soname: bool, runtime_readable: bool
                     ) -> tuple[Optional[Evidence], int]:
    """The evidence of the library at PATH named LIBRARY (SIZE bytes; LINK: how a link
    names it, or what its SONAME says; REGULAR: a file, not a link; BY_SONAME: LIBRARY is
    the name its SONAME gives it; RUNTIME_READABLE: a CUDA runtime this size is read
    whole), and what more of it to read (READ_*)."""
    stem, version = library.group("stem"), library.group("version") or ""
    component = library_component(stem)
    if regular and not version and size and not by_soname \
            and (stem == "amdhip64" or component is not None):
        if component == "cuda-runtime" and runtime_readable:
            return None, READ_SONAME_WHOLE
        return None, READ_SONAME
    if stem == "amdhip64":
        # libamdhip64.so.6.4.43483 is ROCm 6.4; a wheel's bundled libamdhip64.so.6
        # (torch's ROCm builds) ROCm 6 (its soname major is the ROCm major).
        if version and (regular or "." in version):
            return Evidence("library", path, "rocm", "hip", version,
                            major_minor(version) or version, detail=link), READ_NOTHING
        return None, READ_NOTHING
    if stem in _API_NUMBERED:
        return None, READ_NOTHING
    if component is None:
        return None, READ_SHARED_OBJECT if regular else READ_NOTHING
    package = SITE_PACKAGE.match(path)
    owner = package.group(2) if package else None
    vendored = bool(library.group("hash")) or (owner or "").endswith(".libs")
    if owner and owner != "nvidia" and not vendored and component in _TOOLCHAIN_COMPONENTS:
        return Evidence(
            PRIVATE_TOOLCHAIN, path, "cuda", component, version, detail=(
                f"a copy of NVIDIA's {component} that {owner} keeps for itself")), READ_NOTHING
    detail = link or ("a vendored copy" if vendored else None)
    if "." in version:
        return Evidence("library", path, "cuda", component, version,
                        detail=detail), READ_NOTHING
    if not regular or not (vendored or (version and owner and owner != "nvidia")):
        return None, READ_NOTHING  # the wheel's dist-info, or the file the link names, says more
    if component == "cuda-runtime" and runtime_readable:
        return None, READ_RUNTIME
    if scheme(component) == OWN_SCHEME:
        # cuDNN, NCCL, cuSPARSELt, cuDSS: the soname major is the library's own
        # (libcusparseLt.so.0), never a CUDA release.
        return Evidence(
            "library", path, "cuda", component, version, None,
            detail=f"{detail or 'a library'}; numbered on its own: its name gives no "
                   "CUDA release"), READ_NOTHING
    return Evidence(
        "library", path, "cuda", component, version, version or None,
        detail=f"{detail or 'a library'}; its name gives "
               + (f"CUDA {version} only" if version else "no version")), READ_NOTHING
