"""The accelerator build a package names or links, for CUDA and ROCm alike.

Three readings, each of a name or of a shared object's dynamic section (`elf.dynamic_entries`):

- distributions whose project name or version carries ROCm or HIP and a release
  (`jax-rocm7-plugin`, `jax-rocm60-plugin`, `onnxruntime-rocm`, `torch 2.9.1+rocm6.4`,
  `hip-python 6.4.1`) or the CUDA major of NVIDIA's bindings (`cuda-bindings 12.9.0`);
- shared objects named for a backend (`libonnxruntime_providers_rocm.so`,
  `libbitsandbytes_cuda128.so`, `libbitsandbytes_rocm64.so`, `libbitsandbytes_cpu.so`);
- the libraries a shared object was linked against: `NEEDED libamdhip64.so.7` is ROCm 7,
  `RUNPATH /opt/rocm-7.2.4/lib` ROCm 7.2, `NEEDED libcudart.so.12` CUDA 12.
"""

from __future__ import annotations

import re
from typing import Optional

from ..toolkit.spellings import ROCM_INSTALL
from .config_env import major_minor
from .elf import DynamicEntries
from .results import BACKEND, LINKED, Evidence

# "jax-rocm7-plugin", "jax-rocm60-plugin", "jax-rocm7-pjrt", "onnxruntime-rocm",
# "rocm-sdk-core": ROCm's major is one digit, the rest the minor.
_ROCM_NAME = re.compile(r"^(.+?)-(?:rocm|hip)(?:(\d)(\d*))?(?:-(?:plugin|pjrt))?$")
_ROCM_PROJECTS = re.compile(r"^(?:hip-python|rocm|rocm-sdk(?:-[a-z0-9-]+)?|amdsmi)$")
_LOCAL_ROCM = re.compile(r"^(?:rocm|hip)(\d+)\.(\d+)")  # "+rocm6.4", "+rocm7.1.1"
# NVIDIA's Python bindings: their major is the CUDA major they bind.
_CUDA_BINDINGS = frozenset({"cuda-bindings", "cuda-python"})
# A shared object named for a backend: libonnxruntime_providers_rocm.so, libtorch_hip.so,
# libbitsandbytes_cuda128.so, libbitsandbytes_rocm64.so, libbitsandbytes_cpu.so.
_BACKEND = re.compile(
    r"/(?P<stem>[^/]*?)[_.-](?P<family>cuda|rocm|hip|cpu)(?P<tag>\d*)(?:[_.-][^/]*)?"
    r"\.so(?:\.\d+)*$")
# Libraries whose soname major is the CUDA major they belong to.
_CUDA_SONAME = re.compile(r"^lib(?:cudart|cublas|cublasLt|nvrtc|nvJitLink)\.so\.(\d+)(?:\.\d+)*$")
_HIP_SONAME = re.compile(r"^libamdhip64\.so\.(\d+)(?:\.\d+)*$")


def tag_release(family: str, tag: str) -> Optional[str]:
    """The release a backend tag names: cuda "128" -> "12.8", "12" -> "12"; rocm "64" ->
    "6.4", "714" -> "7.14", "7" -> "7"; no tag -> None."""
    if not tag:
        return None
    major = 2 if family == "cuda" and len(tag) > 1 else 1
    if len(tag) <= major:
        return tag
    return f"{int(tag[:major])}.{int(tag[major:])}"


def distribution_evidence(path: str, project: str, version: str, label: str,
                          local: str) -> Optional[Evidence]:
    """Evidence from a distribution's ROCm name or local version, or NVIDIA's bindings."""
    rocm = _LOCAL_ROCM.match(local)
    if rocm:
        release = f"{int(rocm.group(1))}.{int(rocm.group(2))}"
        return Evidence("dist-info", path, "rocm", project, version, release,
                        distribution=label, built=True,
                        detail=f"its local version +{local} names the ROCm build")
    named = _ROCM_NAME.match(project)
    if named:
        tagged = tag_release("rocm", (named.group(2) or "") + (named.group(3) or ""))
        says = f"ROCm {tagged}" if tagged else "ROCm"
        return Evidence("dist-info", path, "rocm", project, version, tagged,
                        distribution=label, built=True,
                        detail=f"its name says it is built for {says}")
    if _ROCM_PROJECTS.match(project):
        # hip-python binds the HIP of its release (a build); AMD's ROCm SDK wheels are
        # the runtime itself (a copy).
        bindings = project == "hip-python"
        return Evidence("dist-info", path, "rocm", project, version, major_minor(version),
                        distribution=label, built=bindings,
                        detail=f"AMD's ROCm {'bindings' if bindings else 'Python package'}: "
                               "its version is the ROCm release")
    if project in _CUDA_BINDINGS:
        major = version.split(".")[0]
        if major.isdigit():
            return Evidence("dist-info", path, "cuda", project, version, major,
                            distribution=label, built=True,
                            detail=f"its major is the CUDA major it binds ({major})")
    return None


def backend(path: str) -> Optional[tuple[str, Optional[str]]]:
    """(family, release) of a shared object named for a backend: ("cuda", "12.8"),
    ("rocm", None) for libonnxruntime_providers_rocm.so, ("cpu", None)."""
    match = _BACKEND.search(path)
    if match is None:
        return None
    family = {"hip": "rocm"}.get(match.group("family"), match.group("family"))
    return family, tag_release(family, match.group("tag"))


def linked_evidence(path: str, entries: DynamicEntries, package: str
                    ) -> list[Evidence]:
    """Evidence from what a shared object links: at most one per family."""
    found = []
    cuda = sorted({m.group(1) for m in map(_CUDA_SONAME.match, entries.needed) if m})
    if cuda:
        needs = ", ".join(n for n in entries.needed if _CUDA_SONAME.match(n))
        found.append(Evidence(
            LINKED, path, "cuda", package, needs, cuda[0] if len(cuda) == 1 else None,
            built=True, detail=f"its dynamic section needs {needs}"))
    hip = [m for m in map(_HIP_SONAME.match, entries.needed) if m]
    paths = [m for m in map(ROCM_INSTALL.match, entries.search_path) if m]
    if hip or paths:
        majors = {m.group(1) for m in hip}
        releases = {major_minor(m.group(1)) for m in paths
                    if not majors or m.group(1).split(".")[0] in majors}
        release = (releases.pop() if len(releases) == 1
                   else majors.pop() if len(majors) == 1 else None)
        said = [f"needs {m.group(0)}" for m in hip]
        said += [f"searches {':'.join(entries.search_path)}"] if paths else []
        found.append(Evidence(
            LINKED, path, "rocm", package, ", ".join(m.group(0) for m in hip) or "",
            release, built=True, detail=f"its dynamic section {' and '.join(said)}"))
    return found


def backend_evidence(evidence: list[Evidence],
                     backends: dict[str, list[tuple[str, str, Optional[str], str]]]
                     ) -> list[Evidence]:
    """EVIDENCE, with each directory of BACKENDS (directory -> the path, family, release
    and package of each of its shared objects named for a backend) that holds shared
    objects named for two or more GPU backends (bitsandbytes: CUDA 11.8 to 13.2, ROCm 6.4
    to 7.2, CPU) judged as one package's run-time choices: each becomes `backend`
    evidence, which the verdict judges as a whole."""
    for libraries in backends.values():
        gpus = {(family, release) for _, family, release, _ in libraries
                if family != "cpu"}
        if len(gpus) < 2:
            continue
        paths = {path for path, _, _, _ in libraries}
        evidence = [e for e in evidence if e.path not in paths]
        names = ", ".join(sorted({f"{f} {r}" if r else f for _, f, r, _ in libraries}))
        for path, family, release, owner in libraries:
            evidence.append(Evidence(
                BACKEND, path, family, owner, release or "", release, detail=(
                    f"one of the {len(libraries)} backends {owner} picks among at run "
                    f"time: {names}")))
    return evidence
