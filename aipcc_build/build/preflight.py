"""What is checked before the first build starts, so that a run fails in a second with one
clear error instead of after an hour: end-of-life toolkits, build contexts, the capacity."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import CheckFailed, InputError
from ..matrix import ImageSpec
from ..matrix.model import parse_quantity
from ..plan import build_context


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
    """This host's CPUs and memory; named slots (gpu...) only exist when given."""
    capacity: dict[str, float] = {"cpu": float(os.cpu_count() or 1)}
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
