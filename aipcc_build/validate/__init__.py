"""The validator: do the images mix accelerator toolkit versions? (issue 4)

The core never prints: it returns typed verdicts that `report` formats. The CUDA component
table it judges by is a library below the stages (`aipcc_build.toolkit`).
"""

from __future__ import annotations

from .pipeline import (
    Outcome,
    Target,
    expectation_from_spec,
    validate_built,
    validate_image,
    validate_targets,
)
from .results import Evidence, Expectation, Finding, ImageVerdict

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
