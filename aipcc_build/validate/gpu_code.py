"""Which GPUs an image's compiled code runs on: the device code its final filesystem holds
(`final_device_code`), the union per family (`summary`), and the judgement against the
architectures it must run on (`coverage_findings`).

Coverage, as the drivers load code: CUDA SASS `sm_XY` runs on the same major at an equal
or higher minor (sm_80 code on sm_86); an arch-specific `sm_XYa` only on sm_XY; a family
`sm_XYf` on its major from minor Y up; PTX `compute_XY` on every architecture from XY on,
compiled by the driver at load time (`compute_XYa` only on sm_XY, `compute_XYf` on its
family). ROCm targets match by processor exactly; a feature flag (`:xnack-`) must agree
with the one the expected target names, and a target without it runs in both settings; a
generic target (`gfx11-generic`) runs on every processor of its family (LLVM's AMDGPU
usage guide, "Generic processor code objects"). A library without device code is not
judged: a framework that compiles its kernels at run time (triton) has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Optional

from ..patterns import lazy
from .results import VIOLATION, DeviceCode, Finding, LayerScan

if TYPE_CHECKING:  # the report and `--expect-gpu-archs` need no final-tree model
    from ..imagefs.overlay import Stack

_CUDA_TARGET = lazy(r"^sm_(\d{2,3})$")
# How an expected CUDA GPU may be spelled, as the matrix allows: 9.0, 90, sm_90, sm_90a.
_CUDA_SPELLING = lazy(r"^(?:sm_|compute_)?(\d{1,2})\.?(\d)[af]?$")
_CUDA_CODE = lazy(r"^(sm|compute)_(\d{2,3})([af]?)$")
_GFX_TARGET = lazy(r"^gfx[0-9a-f]{3,5}(?::(?:xnack|sramecc)[+-])*$")
# The processors each generic target runs on (LLVM AMDGPUUsage, generic processors).
GENERIC_FAMILIES = {
    "gfx9-generic": ("gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"),
    "gfx9-4-generic": ("gfx940", "gfx941", "gfx942", "gfx950"),
    "gfx10-1-generic": ("gfx1010", "gfx1011", "gfx1012", "gfx1013"),
    "gfx10-3-generic": ("gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035",
                        "gfx1036"),
    "gfx11-generic": ("gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151",
                      "gfx1152", "gfx1153"),
    "gfx12-generic": ("gfx1200", "gfx1201"),
}


class BadArch(ValueError):
    """An expected architecture this reader cannot place."""


def _arch_sort_key(arch: str) -> tuple[str, int, str]:
    head, _, rest = arch.partition("_")
    digits = "".join(c for c in rest if c.isdigit())
    return head, int(digits) if digits else 0, rest


def sort_archs(archs: Iterable[str]) -> tuple[str, ...]:
    """sm_75 before sm_100; gfx targets by name."""
    return tuple(sorted(set(archs), key=_arch_sort_key))


def parse_expected(archs: Sequence[str]) -> tuple[str, ...]:
    """The expected GPU architectures, checked: sm_XY (a GPU, not a code target) or a gfx
    processor with optional feature flags. Raises BadArch naming the first bad one."""
    out = []
    for arch in archs:
        arch = arch.strip().lower()
        cuda = _CUDA_SPELLING.match(arch)
        if cuda:
            arch = f"sm_{cuda.group(1)}{cuda.group(2)}"
        if not (_CUDA_TARGET.match(arch) or _GFX_TARGET.match(arch)):
            raise BadArch(f"{arch!r} is not a GPU architecture (sm_80, sm_90, gfx942, "
                          "gfx90a:xnack-)")
        out.append(arch)
    return tuple(dict.fromkeys(out))


def family_of(arch: str) -> str:
    return "rocm" if arch.startswith("gfx") else "cuda"


def _cuda_number(arch: int) -> tuple[int, int]:
    return arch // 10, arch % 10


def cuda_code_runs_on(code: str, target: str) -> bool:
    """Whether CUDA code target CODE (sm_80, compute_90, sm_90a, sm_100f) runs on the GPU
    TARGET (sm_86)."""
    found, wanted = _CUDA_CODE.match(code), _CUDA_TARGET.match(target)
    if not found or not wanted:
        return False
    kind, number, suffix = found.group(1), int(found.group(2)), found.group(3)
    have, want = _cuda_number(number), _cuda_number(int(wanted.group(1)))
    if suffix == "a":
        return have == want
    if suffix == "f" or kind == "sm":
        return have[0] == want[0] and have[1] <= want[1]
    return have <= want  # PTX: every later architecture, by JIT


def _features(target: str) -> tuple[str, dict[str, str]]:
    processor, *flags = target.split(":")
    return processor, {flag[:-1]: flag[-1] for flag in flags if flag[-1:] in "+-"}


def gfx_code_runs_on(code: str, target: str) -> bool:
    """Whether ROCm code object target CODE (gfx90a:xnack-, gfx11-generic) runs on TARGET."""
    have, have_flags = _features(code)
    want, want_flags = _features(target)
    if have != want and want not in GENERIC_FAMILIES.get(have, ()):
        return False
    return all(want_flags.get(name, setting) == setting
               for name, setting in have_flags.items())


def runs_on(code: DeviceCode, target: str) -> Optional[str]:
    """The code target of CODE that runs on TARGET, SASS before PTX, the latest of them
    (the one the driver picks); None if none does."""
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
    findings = []
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
