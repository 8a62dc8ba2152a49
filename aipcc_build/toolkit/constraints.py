"""The pip and uv constraints that keep an image's Python environment on its own toolkit.

conda-forge keeps a solve on one CUDA release with its `cuda-version` package, which every
component pins; pip and uv have no such thing, so a later `pip install` of a framework
that pins NVIDIA's component wheels of another release mixes the image (users report the
undefined cuBLAS symbols and "found cuBLAS X but built against Y" that follow). Each image
carries instead a constraints file generated here from the component table
(`data/cuda-components.json`):

- a release-numbered component of the image's CUDA major (cudart, nvrtc, cuBLAS 12, ...)
  is limited to the image's major.minor (`==12.8.*`, every patch release of the minor);
- a component on exact versions (cuFFT, cuSPARSE, ...) to the versions the table's patch
  releases of the minor pin (`>=first,<last-bumped`, so a wheel appending a part to the
  last one fits);
- the component names of other CUDA majors (`nvidia-cuda-runtime` in a CUDA 12 image,
  `nvidia-cudnn-cu12` in a CUDA 13 one) and accelerator wheels of other families (ROCm's
  in a CUDA image, every one in a CPU image) are excluded. pip and uv have no "exclude":
  the line pins a version no wheel has, `==0+not.in.cuda12.8.images...`, whose local label
  is what their refusal prints;
- components on their own numbering (cuDNN, NCCL, ...) are left free under the image's
  major: their names say the major they are built for.

Every limiting line also carries a clause no real version meets: its range's lowest
version with a local label naming the image's release and this file
(`!=12.8+cuda12.8.image.see.etc.aipcc.constraints.txt`). pip prints the whole line when it
refuses; uv prints the range it kept, which that clause splits in two at the label, so
both messages name the image's release and this file (a clause outside the range, which
uv drops from its message, named them for pip only). The first lines of the file say why
and how to override it; the validator reads `HEADER_TAG`'s line back to check the file
belongs to the image's labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Optional

from ..patterns import lazy
from ..records import record
from . import components

# Where the renderer writes the file in every image: pip's `constraint` (PIP_CONSTRAINT,
# /etc/pip.conf) and uv's `UV_CONSTRAINT` name it; uv.toml repeats its lines.
CONSTRAINTS_PATH = "/etc/aipcc-constraints.txt"
# A requirements file holding only `-c CONSTRAINTS_PATH`: `uv run --with` reads no
# UV_CONSTRAINT, but reads the constraints of a `--with-requirements` file.
UV_WITH_PATH = "/etc/aipcc-uv-with.txt"
# The file's line that says what it is for: "# aipcc-build constraints: cuda 12.8".
HEADER_TAG = "# aipcc-build constraints:"
_HEADER = lazy(r"^# aipcc-build constraints: (cuda|rocm|cpu)(?: (\d+\.\d+))?\s*$",
                     re.MULTILINE)
# The path as a local version label can spell it (letters, digits and dots).
_PATH_LABEL = "see.etc.aipcc.constraints.txt"

# CUDA 11's component wheels carry "-cu11" (nvidia-cuda-runtime-cu11, nvidia-cudnn-cu11:
# what torch 1.13 and 2.0 pulled); the table starts at 12.0, so CUDA 11's names are taken
# as its 12.0 components' names with that suffix, unless the table lists 11 itself.
_OLDER_MAJORS = {"11": "-cu11"}
# Accelerator wheels named by the major they are built for, besides NVIDIA's components:
# JAX's plugins (jax-cuda12-plugin, jax-rocm7-pjrt; ROCm 6.0's were jax-rocm60-*).
_JAX_CUDA = ("jax-cuda{major}-plugin", "jax-cuda{major}-pjrt")
_JAX_ROCM = ("jax-rocm{major}-plugin", "jax-rocm{major}-pjrt")
# The ROCm builds on PyPI: jax-rocm60-plugin (ROCm 6.0) and jax-rocm7-plugin (ROCm 7.x);
# there is no jax-rocm6-plugin, and a line for a name no index has costs pip time for nothing.
_ROCM_MAJORS = ("60", "7")
# ROCm wheels not named by a major: out of CUDA and CPU images altogether (ONNX Runtime's
# ROCm build; the Triton that PyTorch's ROCm wheels require).
_ROCM_UNVERSIONED = ("onnxruntime-rocm", "pytorch-triton-rocm")


def stage_carries(base: str) -> bool:
    """Whether a stage FROM BASE gets the constraints (and pip's and uv's configuration):
    every one but FROM scratch, which has no shell to write them with and, holding no pip,
    uv or Python of its own (a root file system is copied in), no use for them. The
    renderer labels an image with CONSTRAINTS_PATH where its last stage carries them, and
    the validator requires the file of a labelled image only (constraints_check)."""
    return base.lower() != "scratch"


@record
class Constraint:
    project: str  # "nvidia-cuda-runtime-cu12"
    specifier: str  # "==12.8.*,!=12.8+cuda12.8.image.see..."
    why: str  # "release-numbered", "exact", "other-major", "other-accelerator"

    def line(self) -> str:
        return f"{self.project}{self.specifier}"


@record
class Target:
    """What an image's constraints are for: its accelerator and major.minor."""

    accelerator: str  # "cuda", "rocm", "cpu"
    release: Optional[str]  # "12.8", "6.4"; None for CPU

    def __str__(self) -> str:
        return f"{self.accelerator} {self.release}" if self.release else self.accelerator

    @property
    def major(self) -> Optional[str]:
        return self.release.split(".")[0] if self.release else None


def target_of(accelerator: str, version: Optional[str]) -> Target:
    """The target of an image of ACCELERATOR at VERSION ("12.8.1" -> cuda 12.8)."""
    release = None
    if accelerator in ("cuda", "rocm") and version:
        match = re.match(r"(\d+)\.(\d+)", version)
        release = f"{int(match.group(1))}.{int(match.group(2))}" if match else None
    return Target(accelerator, release)


def _bump(version: str) -> str:
    """The version right above VERSION's last part: 11.3.3.83 -> 11.3.3.84."""
    parts = version.split(".")
    return ".".join([*parts[:-1], str(int(parts[-1]) + 1)])


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _suffixes() -> dict[str, str]:
    """CUDA major -> wheel suffix, for every major whose names the constraints know."""
    table = components.table()
    majors = {r.split(".")[0] for r in table.releases}
    suffixes = {major: table.wheel_suffix.get(major, "") for major in majors}
    for major, suffix in _OLDER_MAJORS.items():
        suffixes.setdefault(major, table.wheel_suffix.get(major, suffix))
    return suffixes


def _names_of_major(major: str) -> set[str]:
    """Every component wheel NVIDIA names for CUDA MAJOR (the table's components of its
    releases, or of its oldest ones for a major it lacks; the own-scheme ones, which every
    major builds)."""
    table = components.table()
    releases = [r for r in table.full if r.split(".")[0] == major] or \
        [r for r in table.full if r.split(".")[0] == min(m.split(".")[0]
                                                          for m in table.releases)]
    names: set[str] = set()
    for release in releases:
        names.update(table.full[release])
    suffix = _suffixes()[major]
    projects = {f"nvidia-{name}{suffix}" for name in names}
    projects.update(_own_scheme_projects(major))
    projects.update(n.format(major=major) for n in _JAX_CUDA)
    return projects


# The PyPI project a table entry's source names, built for CUDA 12: nvidia-cudnn-cu12,
# cutensor-cu12, nvidia-dali-cuda120.
_SOURCE_PROJECT = lazy(r"pypi\.org/project/([A-Za-z0-9._-]+?)-(cu|cuda)12(0?)(?=\s|$)")


@cache
def _own_scheme_projects(major: str) -> frozenset[str]:
    """The projects of the components on their own numbering built for MAJOR, named as
    their CUDA 12 builds are (the table's sources): the major stays in the name under every
    major (nvidia-cudnn-cu13 beside CUDA 13's unsuffixed nvidia-cuda-runtime; DALI's
    nvidia-dali-cuda130)."""
    table = components.table()
    projects = set()
    for name in table.own_scheme:
        match = _SOURCE_PROJECT.search(table.sources.get(name, ""))
        if match:
            projects.add(f"{match.group(1)}-{match.group(2)}{major}{match.group(3)}")
        else:
            projects.add(f"nvidia-{name}-cu{major}")
    return frozenset(projects)


def _all_nvidia() -> set[str]:
    return set().union(*(_names_of_major(major) for major in _suffixes()))


def _rocm_names(keep: Optional[str] = None) -> set[str]:
    names = {n.format(major=m) for m in _ROCM_MAJORS if not (keep and m.startswith(keep))
             for n in _JAX_ROCM}
    return names if keep else names | set(_ROCM_UNVERSIONED)


def _minor_versions(release: str) -> dict[str, list[str]]:
    """Component -> its versions over the table's patch releases of RELEASE ("12.8")."""
    table = components.table()
    found: dict[str, set[str]] = {}
    for full, pinned in table.full.items():
        if full.rsplit(".", 1)[0] == release:
            for name, version in pinned.items():
                found.setdefault(name, set()).add(version)
    return {name: sorted(versions, key=_key) for name, versions in found.items()}


def constraints_for(target: Target) -> tuple[Constraint, ...]:
    """The constraints of an image of TARGET, sorted by project.

    For a CUDA release the component table does not list, only the release-numbered
    components (whose versions say their release) are limited.
    """
    label = f"{target.accelerator}{target.release or ''}.image.{_PATH_LABEL}"
    excluded = f"==0+not.in.{target.accelerator}{target.release or ''}.images.{_PATH_LABEL}"
    found: dict[str, Constraint] = {}

    def exclude(names: Iterable[str], why: str) -> None:
        for name in names:
            found.setdefault(name, Constraint(name, excluded, why))

    if target.accelerator == "cuda" and target.release:
        major = target.major or ""
        table = components.table()
        versions_of = _minor_versions(target.release)
        if not versions_of:
            # A release the table does not list yet (the matrix's vars supply its RPM
            # versions): its release-numbered components are still known by their names.
            versions_of = {name: [] for name, majors in table.numbered.items()
                           if major in majors}
        for name, versions in sorted(versions_of.items()):
            project = components.wheel_project(name, target.release)
            if major in table.numbered.get(name, ()):
                lowest, why = target.release, "release-numbered"
                spec = f"=={lowest}.*"
            elif not versions:
                continue
            else:
                lowest, why = versions[0], "exact"
                spec = f">={lowest},<{_bump(versions[-1])}"
            found[project] = Constraint(project, f"{spec},!={lowest}+{label}", why)
        others = set().union(*(_names_of_major(m) for m in _suffixes() if m != major))
        exclude(sorted(others - _names_of_major(major)), "other-major")
        exclude(sorted(_rocm_names()), "other-accelerator")
    elif target.accelerator == "rocm" and target.major:
        exclude(sorted(_all_nvidia()), "other-accelerator")
        exclude(sorted(_rocm_names(keep=target.major)), "other-major")
    else:
        exclude(sorted(_all_nvidia() | _rocm_names()), "other-accelerator")
    return tuple(sorted(found.values(), key=lambda c: c.project))


def _explain(target: Target) -> list[str]:
    if target.accelerator == "cuda":
        what = [f"NVIDIA CUDA component wheels of CUDA {target.release} only (cuDNN, NCCL and",
                f"the others on their own numbering: builds for CUDA {target.major})."]
    elif target.accelerator == "rocm":
        what = [f"no NVIDIA wheels, and ROCm wheels built for ROCm {target.major} only."]
    else:
        what = ["no NVIDIA or ROCm wheels: this image has no accelerator toolkit."]
    return [
        HEADER_TAG + f" {target}",
        "# Generated by aipcc-build from aipcc_build/toolkit/constraints.py and its CUDA",
        "# component table: do not edit ('aipcc-build render' writes it).",
        "#",
        f"# Why: this is a {target} image. pip and uv admit here",
        *(f"# {line}" for line in what),
        "# A framework that pins components of another release would mix two toolkits in",
        "# one environment, which fails at run time (undefined cuBLAS symbols, \"found",
        "# cuBLAS version X but built against Y\"). pip and uv read this file by themselves",
        "# (PIP_CONSTRAINT and UV_CONSTRAINT name it, and the *_BUILD_CONSTRAINT ones for",
        "# build environments; /etc/pip.conf has it as constraint, /etc/uv/uv.toml",
        "# repeats its lines; the `uv` first on PATH checks uv run --with, uv sync and",
        "# pylock installs), so such an install fails before anything is installed. Your",
        "# own PIP_CONSTRAINT or UV_CONSTRAINT adds to this file. A line NAME==0+not.in...",
        "# keeps NAME out: no wheel has that version.",
        "#",
        "# Override deliberately (you then own the mix; the image validation may fail):",
        "#   PIP_CONSTRAINT=/dev/null pip install ...",
        "#   UV_CONSTRAINT=/dev/null UV_CONFIG_FILE=/dev/null uv pip install ...",
        "# Better: install the wheels built for this image release from its own index.",
    ]


def constraints_text(target: Target) -> str:
    """The constraints file of an image of TARGET: the comment, then one line each."""
    lines = [*_explain(target), *(c.line() for c in constraints_for(target))]
    return "\n".join(lines) + "\n"


def target_in(text: str) -> Optional[Target]:
    """The target a constraints file's header line names; None when it has none."""
    match = _HEADER.search(text)
    if not match:
        return None
    return Target(match.group(1), match.group(2))


def majors_named(project: str) -> tuple[str, ...]:
    """The CUDA majors whose component wheels NVIDIA names PROJECT ("nvidia-cuda-runtime"
    -> ("13",), "nvidia-cudnn-cu12" -> ("12",)); empty for a name of no component. A
    requirement that names a component without pinning it still says its major."""
    name = re.sub(r"[-_.]+", "-", project).lower()
    return tuple(sorted(m for m in _suffixes() if name in _names_of_major(m)))
