"""The validator: do the images mix accelerator toolkit versions? (issue 4)

The core never prints: it returns typed verdicts that `report` formats. The CUDA component
table it judges by is a library below the stages (`aipcc_build.toolkit`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .results import Evidence, Expectation, Finding, ImageVerdict

if TYPE_CHECKING:
    from .pipeline import (
        Outcome,
        Target,
        expectation_from_spec,
        validate_built,
        validate_image,
        validate_targets,
    )

_PIPELINE = frozenset({"Outcome", "Target", "expectation_from_spec", "validate_built",
                       "validate_image", "validate_targets"})


def __getattr__(name: str) -> Any:
    # The pipeline (skopeo, the layer cache, the process pool) is imported on first use: a
    # judgement of a requirements set (validate.requirements) needs none of it.
    if name in _PIPELINE:
        from . import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
