"""What is checked before the first build starts, so that a run fails in a second with one
clear error instead of after an hour: end-of-life toolkits, build contexts, the capacity,
emulation for foreign platforms."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import CheckFailed, InputError
from ..matrix import ImageSpec
from ..matrix.model import parse_quantity
from ..matrix.platforms import describe, host_platform
from ..plan import BuildPlan, build_context

# Where the kernel lists the interpreters it runs foreign binaries with (qemu-aarch64, ...).
BINFMT_DIR = "/proc/sys/fs/binfmt_misc"


def parse_capacity(text: str) -> dict[str, float]:
    """`cpu=8,memory=32Gi,gpu=0` -> {"cpu": 8, "memory": 34359738368, "gpu": 0}."""
    capacity: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, amount = item.partition("=")
        value = parse_quantity(amount)
        if not sep or not name.strip() or value is None:
            raise InputError(f"'{item}' is not SLOT=AMOUNT (like cpu=8 or memory=32Gi)",
                             field="capacity")
        capacity[name.strip()] = value
    return capacity


def detect_capacity() -> dict[str, float]:
    """This host's CPUs and memory, and emulated builds at once: half the CPUs (qemu keeps
    a CPU busy all along a RUN step); named slots (gpu...) only exist when given."""
    cpus = os.cpu_count() or 1
    capacity: dict[str, float] = {"cpu": float(cpus), "emulation": float(max(1, cpus // 2))}
    with contextlib.suppress(ValueError, OSError, AttributeError):
        capacity["memory"] = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return capacity


def check_eol(images: Sequence[ImageSpec], today: dt.date, allow_eol: bool) -> list[str]:
    """Refuse toolkit versions past their `eol` date unless allowed; return the messages
    (for a warning when allowed)."""
    past: dict[tuple[str, str], str] = {}
    for image in images:
        toolkit = image.toolkit
        if toolkit is not None and toolkit.eol is not None and toolkit.eol < today:
            past[(image.accelerator, toolkit.version)] = (
                f"{image.accelerator} {toolkit.version} reached end of life on "
                f"{toolkit.eol.isoformat()}"
            )
    messages = list(past.values())
    if messages and not allow_eol:
        raise CheckFailed("; ".join(messages) + " (drop it from the matrix, or allow "
                          "end-of-life builds)", field="allow_eol")
    return messages


def check_contexts(images: Sequence[ImageSpec]) -> None:
    for image in images:
        context = build_context(image)
        if not Path(context).is_dir():
            raise InputError(f"the build context of {image.key} does not exist: {context}",
                             field=f"images.{image.kind}.context")


def check_emulation(plan: BuildPlan, binfmt_dir: str = BINFMT_DIR) -> None:
    """Refuse, before anything builds, a foreign platform no emulator is registered for:
    its first RUN step would fail with "exec format error" after the native builds ran."""
    host = host_platform()
    missing = sorted({build.platform for build in plan.builds
                      if build.emulated and not emulator_registered(build.platform, binfmt_dir)})
    if missing:
        entries = ", ".join(f"qemu-{describe(p).machine}" for p in missing)
        raise InputError(
            f"{', '.join(missing)} is not this host's platform ({host}) and no emulator is "
            f"registered for it (no enabled {entries} in {binfmt_dir}): register "
            "qemu-user-static with binfmt_misc (scripts/setup-emulation does), build on such "
            "a host, or select the host's platform only", field="platforms")


def emulator_registered(platform: str, binfmt_dir: str = BINFMT_DIR) -> bool:
    """Whether binfmt_misc has an enabled qemu entry for PLATFORM's CPU."""
    machine = describe(platform).machine
    for name in (f"qemu-{machine}", f"qemu-{machine}-static"):
        try:
            with open(os.path.join(binfmt_dir, name), encoding="utf-8") as entry:
                if entry.readline().strip() == "enabled":
                    return True
        except OSError:
            continue
    return False
