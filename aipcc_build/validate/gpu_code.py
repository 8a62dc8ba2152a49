"""Which GPUs an image's compiled code runs on: the device code its final filesystem holds
(`final_device_code`), the union per family (`summary`), and the judgement against the
architectures it must run on (`coverage_findings`), by the rules of `toolkit.gpu_archs`
(which code runs on which GPU, and the one order of architectures). A library without
device code is not judged: a framework that compiles its kernels at run time (triton) has
none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

from .results import VIOLATION, DeviceCode, Finding, LayerScan

if TYPE_CHECKING:  # the report and `--expect-gpu-archs` need no final-tree model
    from ..imagefs.overlay import Stack


def runs_on(code: DeviceCode, target: str) -> Optional[str]:
    """The code target of CODE that runs on TARGET, SASS before PTX, the latest of them
    (the one the driver picks); None if none does."""
    from ..toolkit.gpu_archs import cuda_code_runs_on, family_of, gfx_code_runs_on

    if family_of(target) == "rocm":
        return next((g for g in code.gfx if gfx_code_runs_on(g, target)), None)
    found = next((s for s in reversed(code.sass) if cuda_code_runs_on(s, target)), None)
    if found is None:
        found = next((p for p in reversed(code.ptx) if cuda_code_runs_on(p, target)), None)
    return found


def final_device_code(scans: Sequence[LayerScan], stack: Stack
                      ) -> tuple[tuple[DeviceCode, str], ...]:
    """The device code of the files the image ends with, each with its layer's digest: what
    the final tree STACK (`scan_stack.stack_of(SCANS)`) says a later layer removes or
    replaces is left out."""
    return tuple(sorted(((code, scan.digest) for number, scan in enumerate(scans)
                         for code in scan.device_code
                         if stack.hider(number, code.path) is None),
                        key=lambda item: item[0].path))


def summary(files: Sequence[DeviceCode]) -> dict[str, dict[str, list[str]]]:
    """{"cuda": {"sass": [...], "ptx": [...]}, "rocm": {"gfx": [...]}}: the union over
    FILES, sorted, absent families and kinds left out."""
    if not files:  # the usual CPU image: no GPU architecture table loaded for it
        return {}
    from ..toolkit.gpu_archs import sort_archs

    sass = sort_archs([a for f in files for a in f.sass])
    ptx = sort_archs([a for f in files for a in f.ptx])
    gfx = sort_archs([a for f in files for a in f.gfx])
    out: dict[str, dict[str, list[str]]] = {}
    if sass or ptx:
        out["cuda"] = {k: list(v) for k, v in (("sass", sass), ("ptx", ptx)) if v}
    if gfx:
        out["rocm"] = {"gfx": list(gfx)}
    return out


def describe(code: DeviceCode) -> str:
    parts = []
    if code.sass:
        parts.append(f"SASS {', '.join(code.sass)}")
    if code.ptx:
        parts.append(f"PTX {', '.join(code.ptx)}")
    if code.gfx:
        parts.append(f"ROCm {', '.join(code.gfx)}")
    return "; ".join(parts) or "no device code"


def coverage_findings(files: Sequence[tuple[DeviceCode, str]], expected: Sequence[str],
                      source: str = "expected") -> list[Finding]:
    """A violation for each expected architecture and each library that carries device
    code of its family but none that runs on it (SOURCE says where the list came from)."""
    findings: list[Finding] = []
    if not files:
        return findings
    from ..toolkit.gpu_archs import family_of

    for target in expected:
        family = family_of(target)
        for code, digest in files:
            has = bool(code.gfx) if family == "rocm" else bool(code.sass or code.ptx)
            if not has or runs_on(code, target) is not None:
                continue
            findings.append(Finding(
                VIOLATION, "device-code", code.path,
                f"none of its GPU code runs on {target} ({source}): it carries "
                f"{describe(code)}", toolkit=family, component=target,
                layer_digest=digest, distribution=code.distribution))
    return findings
