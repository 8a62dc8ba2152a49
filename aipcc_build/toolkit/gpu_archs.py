"""GPU architectures: the one reader of their spellings, their order, and which code runs
on which GPU. The matrix loader, `compat` and `select`, and the validator's
`--expect-gpu-archs` and coverage judgement all read them here, so a spelling one accepts
no other refuses.

A CUDA target is `sm_XY` (SASS) or `compute_XY` (PTX), X the major and Y the one-digit
minor, with an arch-specific `a` (`sm_90a`) or family `f` (`sm_100f`) suffix; a declared one
may also be spelled as a compute capability (`9.0`, `10.0a`) or its digits (`90`). A ROCm
target is a processor, `gfx` with its major (6 to 19), minor digit and hex stepping
(`gfx90a`, `gfx942`, `gfx1100`), or a generic target (`gfx11-generic`, `gfx9-4-generic`),
each with at most one `xnack` and one `sramecc` feature flag (`gfx90a:xnack-`).

Coverage, as the drivers load code: CUDA SASS `sm_XY` runs on the same major at an equal
or higher minor (sm_80 code on sm_86); an arch-specific `sm_XYa` only on sm_XY; a family
`sm_XYf` on its major from minor Y up; PTX `compute_XY` on every architecture from XY on,
compiled by the driver at load time (`compute_XYa` only on sm_XY, `compute_XYf` on its
family). ROCm targets match by processor exactly; a feature flag (`:xnack-`) must agree
with the one the expected target names, and a target without it runs in both settings; a
generic target (`gfx11-generic`) runs on every processor of its family (LLVM's AMDGPU
usage guide, "Generic processor code objects").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..patterns import lazy
from ..records import record

# Matched whole (fullmatch: a `$` would let a trailing newline through). A compute
# capability, MAJOR.MINOR (9.0, 12.1): how a GPU is named, and one spelling of its code.
_CAPABILITY = r"([1-9]\d?)\.(\d)"
_CUDA = lazy(r"(?:(sm|compute)_([1-9]\d?)(\d)|" + _CAPABILITY + r"|([1-9]\d?)(\d))([af]?)")
CAPABILITY = lazy(_CAPABILITY)
_GFX = lazy(r"gfx(?:(1\d|[6-9])(\d)([0-9a-f])|(1\d|[6-9])(?:-(\d))?-generic)"
            r"((?::[a-z]+[+-])*)")
_FEATURES = ("xnack", "sramecc")
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
EXAMPLES = "sm_80, sm_90a, 9.0, gfx942, gfx90a:xnack-"


class BadArch(ValueError):
    """A GPU architecture this reader cannot place."""


@record
class Arch:
    """One target, read: `text` its one spelling (sm_90a, compute_90, gfx90a:xnack-)."""

    text: str
    family: str  # "cuda" or "rocm"
    kind: str  # "sm", "compute" or "gfx"
    major: int
    minor: int  # -1: a generic target naming no minor (gfx11-generic)
    stepping: int = -1  # a gfx processor's last hex digit; -1 for CUDA and generic targets
    suffix: str = ""  # CUDA's "a" (arch-specific) or "f" (family)
    flags: tuple[str, ...] = ()  # "xnack-", "sramecc+"

    @property
    def generic(self) -> bool:
        return self.kind == "gfx" and self.stepping < 0


def _shown(text: str) -> str:
    """TEXT as an error quotes it: a value of any length read from a file stays one short
    line."""
    text = str(text)
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"


def parse_arch(text: str) -> Arch:
    """TEXT read as a GPU architecture or code target; raises BadArch naming it."""
    spelled = str(text).strip(" ").lower()
    cuda = _CUDA.fullmatch(spelled)
    if cuda:
        kind, major, minor, suffix = "sm", 0, 0, cuda.group(8)
        if cuda.group(1):
            kind, major, minor = cuda.group(1), int(cuda.group(2)), int(cuda.group(3))
        elif cuda.group(4):
            major, minor = int(cuda.group(4)), int(cuda.group(5))
        else:
            major, minor = int(cuda.group(6)), int(cuda.group(7))
        return Arch(f"{kind}_{major}{minor}{suffix}", "cuda", kind, major, minor,
                    suffix=suffix)
    gfx = _GFX.fullmatch(spelled)
    if gfx:
        flags = tuple(flag for flag in gfx.group(6).split(":") if flag)
        names = [flag[:-1] for flag in flags]
        if any(name not in _FEATURES for name in names) or len(set(names)) < len(names):
            raise BadArch(f"{_shown(text)} is not a GPU architecture: a ROCm target's "
                          f"feature flags are {' and '.join(_FEATURES)}, each once, with + or -")
        if gfx.group(1):
            return Arch(spelled, "rocm", "gfx", int(gfx.group(1)), int(gfx.group(2)),
                        int(gfx.group(3), 16), flags=flags)
        if spelled.split(":")[0] not in GENERIC_FAMILIES:
            raise BadArch(f"{_shown(text)} is not a GPU architecture: the generic ROCm "
                          f"targets are {', '.join(GENERIC_FAMILIES)}")
        return Arch(spelled, "rocm", "gfx", int(gfx.group(4)),
                    int(gfx.group(5)) if gfx.group(5) else -1, flags=flags)
    raise BadArch(f"{_shown(text)} is not a GPU architecture ({EXAMPLES})")


def parse_compute_capability(text: str) -> str:
    """TEXT read as a GPU's compute capability, MAJOR.MINOR (`9.0`, `12.1`) as
    `parse_arch` reads that spelling, but a GPU's: no `a` or `f` code suffix, no `sm_90`.
    Raises BadArch."""
    spelled = str(text).strip(" ")
    if CAPABILITY.fullmatch(spelled) is None:
        raise BadArch(f"{_shown(text)} is not a compute capability (e.g. 9.0)")
    return spelled


def declared_arch(text: str) -> str:
    """A GPU architecture a matrix entry or a node declares, in its one spelling: `sm_XY`
    with its `a` or `f` suffix kept (PTX `compute_90` and `9.0` read as sm_90), or a gfx
    processor with its feature flags. A generic ROCm target is code for several GPUs, not
    a GPU: refused. Raises BadArch."""
    arch = parse_arch(text)
    if arch.generic:
        raise BadArch(f"{_shown(text)} is a code target for several GPUs, not a GPU: name "
                      f"them ({', '.join(GENERIC_FAMILIES[arch.text.split(':')[0]])})")
    if arch.kind == "compute":
        return f"sm_{arch.major}{arch.minor}{arch.suffix}"
    return arch.text


def expected_gpus(archs: Sequence[str]) -> tuple[str, ...]:
    """The GPUs device code must run on, checked: each declared architecture as its GPU
    (`sm_90a` and `sm_90f` are sm_90), once, in the order given. Raises BadArch naming the
    first bad one."""
    gpus = []
    for text in archs:
        arch = declared_arch(text)
        gpus.append(arch[:-1] if arch.startswith("sm_") and arch[-1] in "af" else arch)
    return tuple(dict.fromkeys(gpus))


def family_of(arch: str) -> str:
    return "rocm" if arch.startswith("gfx") else "cuda"


def _sort_key(text: str) -> tuple[object, ...]:
    try:
        arch = parse_arch(text)
    except BadArch:  # what a hostile file names: after every target read, by its text
        return (2, 0, 0, 0, 0, "", text)
    return (0 if arch.family == "cuda" else 1, arch.major, arch.minor, arch.stepping,
            0 if arch.kind != "compute" else 1, arch.suffix, text)


def sort_archs(archs: Iterable[str]) -> tuple[str, ...]:
    """CUDA before ROCm, each by its number: sm_75 before compute_90 before sm_100 (SASS
    before PTX of one number, a plain target before its `a` and `f` ones), gfx908 before
    gfx90a before gfx1100; what is no architecture last."""
    return tuple(sorted(set(archs), key=_sort_key))


def cuda_code_runs_on(code: str, target: str) -> bool:
    """Whether CUDA code target CODE (sm_80, compute_90, sm_90a, sm_100f) runs on the GPU
    TARGET (sm_86)."""
    try:
        have, want = parse_arch(code), parse_arch(target)
    except BadArch:
        return False
    if have.family != "cuda" or want.kind != "sm" or want.suffix:
        return False
    if have.suffix == "a":
        return (have.major, have.minor) == (want.major, want.minor)
    if have.suffix == "f" or have.kind == "sm":
        return have.major == want.major and have.minor <= want.minor
    return (have.major, have.minor) <= (want.major, want.minor)  # PTX: later GPUs, by JIT


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


def code_runs_on(code: str, target: str) -> bool:
    """Whether code target CODE, of either family, runs on the GPU TARGET."""
    if family_of(target) == "rocm":
        return family_of(code) == "rocm" and gfx_code_runs_on(code, target)
    return cuda_code_runs_on(code, target)
