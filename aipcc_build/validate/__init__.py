"""The validator: do the images mix accelerator toolkit versions? (issue 4)

The core never prints: it returns typed verdicts that `report` formats.

The names below load on first use (PEP 562), so that importing a light submodule such as
`validate.components` (which `render` reads for the template context) does not load the
layer readers and the verdict machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .pipeline import (
        Outcome,
        Target,
        expectation_from_spec,
        validate_built,
        validate_image,
        validate_targets,
    )
    from .results import Evidence, Expectation, Finding, ImageVerdict

_HOME = {
    "Evidence": "results",
    "Expectation": "results",
    "Finding": "results",
    "ImageVerdict": "results",
    "Outcome": "pipeline",
    "Target": "pipeline",
    "expectation_from_spec": "pipeline",
    "validate_built": "pipeline",
    "validate_image": "pipeline",
    "validate_targets": "pipeline",
}

__all__ = [
    "Evidence",
    "Expectation",
    "Finding",
    "ImageVerdict",
    "Outcome",
    "Target",
    "expectation_from_spec",
    "validate_built",
    "validate_image",
    "validate_targets",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
