"""Map CUDA component versions to the CUDA release they ship with.

The table lives in `aipcc_build/data/cuda-components.json`; every entry names its sources.
cuFFT, cuRAND, cuSOLVER, cuSPARSE and NPP have their own numbering (cuSPARSE is 12.5.x
under both CUDA 12.8 and 12.9), so only exact versions map; an unknown version is
`unmapped`, never guessed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Optional

from .results import Evidence

_SUFFIX = re.compile(r"^(.+)-cu(\d+)$")


@dataclass(frozen=True)
class ComponentTable:
    releases: frozenset[str]  # every CUDA release ("12.8")
    release_numbered: frozenset[str]  # components versioned as the CUDA release
    exact: dict[tuple[str, str], tuple[str, ...]]  # (component, version) -> releases


@lru_cache(maxsize=1)
def table() -> ComponentTable:
    text = resources.files("aipcc_build").joinpath("data/cuda-components.json").read_text()
    data = json.loads(text)
    return ComponentTable(
        releases=frozenset(data["cuda_releases"]["releases"]),
        release_numbered=frozenset(data["release_numbered"]["components"]),
        exact={(e["component"], e["version"]): tuple(e["cuda"]) for e in data["components"]},
    )


def _split(component: str) -> tuple[str, Optional[str]]:
    """"cudnn-cu12" -> ("cudnn", "12"): wheel names carry the CUDA major as a suffix."""
    match = _SUFFIX.match(component)
    return (match.group(1), match.group(2)) if match else (component, None)


def is_cuda_component(component: str) -> bool:
    base, _ = _split(component)
    known = table()
    return base in known.release_numbered or any(c == base for c, _ in known.exact)


def resolve(evidence: Evidence) -> Optional[tuple[str, ...]]:
    """The releases this evidence belongs to ("12.8", or "12" for any 12.x); None: unmapped."""
    if evidence.release:
        return (evidence.release,)
    if evidence.toolkit != "cuda":
        return None
    known = table()
    base, major = _split(evidence.component)
    releases = known.exact.get((base, evidence.version))
    if releases is None and base in known.release_numbered:
        match = re.match(r"(\d+\.\d+)", evidence.version)
        if match and match.group(1) in known.releases:
            releases = (match.group(1),)
    if releases and major:
        releases = tuple(r for r in releases if r.split(".")[0] == major) or None
    return releases


def fits(releases: tuple[str, ...], expected: str) -> bool:
    """Whether evidence of RELEASES belongs in an image of EXPECTED ("12.8")."""
    major = expected.split(".")[0]
    return any(r == expected or ("." not in r and r == major) for r in releases)
