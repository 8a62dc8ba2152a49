"""CPU platforms: the OCI names a matrix may use, their other spellings, and the host's.

One image name covers every platform (a manifest list); templates still need the
architecture in the spellings vendors use: OCI's `amd64`/`arm64` (image configs, Debian),
the kernel's `x86_64`/`aarch64` (`uname -m`, RPM), and NVIDIA's repository directories,
`x86_64`/`sbsa` (Arm server base system architecture).
"""

from __future__ import annotations

import platform as _platform
from dataclasses import dataclass
from typing import Optional

from ..suggest import did_you_mean


@dataclass(frozen=True)
class Platform:
    name: str  # OCI: "linux/arm64"
    arch: str  # OCI architecture: "arm64"
    machine: str  # uname -m, RPM architecture, qemu's CPU name: "aarch64"
    nvidia_arch: str  # NVIDIA's repository directory: "sbsa"

    @property
    def file_suffix(self) -> str:
        """`Containerfile.arm64`: one rendered file per platform of a multi-platform image."""
        return self.arch


KNOWN: dict[str, Platform] = {
    p.name: p for p in (
        Platform("linux/amd64", "amd64", "x86_64", "x86_64"),
        Platform("linux/arm64", "arm64", "aarch64", "sbsa"),
        Platform("linux/ppc64le", "ppc64le", "ppc64le", "ppc64le"),
        Platform("linux/s390x", "s390x", "s390x", "s390x"),
    )
}
# Spellings people write for a known platform (Konflux writes linux/x86_64).
ALIASES = {f"linux/{p.machine}": p.name for p in KNOWN.values() if p.machine != p.arch}

# Accelerators whose vendor publishes for some platforms only: AMD ships ROCm for x86_64.
VENDOR_PLATFORMS: dict[str, tuple[str, ...]] = {"rocm": ("linux/amd64",)}

# How much longer a build takes under qemu user emulation than natively, when no history
# says: bench/makespan_platforms.py measured 5.7x-9.6x (mean 7.8x) for CPU-bound RUN steps
# on a 2-core x86_64 host running arm64.
EMULATION_SLOWDOWN = 8.0


def host_platform() -> str:
    """The platform this machine builds natively."""
    machine = _platform.machine()
    for known in KNOWN.values():
        if machine in (known.machine, known.arch):
            return known.name
    return f"linux/{machine}"


def describe(name: str) -> Platform:
    """The spellings of NAME: a platform the matrix loader accepted, or a host's own."""
    if name in KNOWN:
        return KNOWN[name]
    cpu = name.split("/")[1] if "/" in name else name
    return Platform(name, cpu, cpu, cpu)


def unknown_hint(name: str) -> str:
    """Why NAME is not a platform, with the likely intended one."""
    if name in ALIASES:
        return f" (the OCI name is '{ALIASES[name]}')"
    return did_you_mean(name, KNOWN, listing="known")


def needs_emulation(name: str, host: Optional[str] = None) -> bool:
    """Whether a build for NAME runs under qemu on HOST (default: this machine)."""
    return name != (host or host_platform())
