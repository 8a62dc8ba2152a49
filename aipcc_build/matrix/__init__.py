"""The matrix stage: the typed model, the file loader (every error located), expansion
into image specs, and round-trip edits of the file.

The loader (and PyYAML) is imported on first use: `validate` needs the model's types
only, and a warm validation is mostly start-up time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .expand import (
    EVERYTHING,
    Filters,
    check_build_id,
    check_filters,
    expand,
    image_name,
    index_layout,
    matching,
    version_matches,
)
from .model import (
    Accelerator,
    AllowRule,
    CiSettings,
    Exclude,
    ImageKind,
    ImageSpec,
    Matrix,
    OsSpec,
    Product,
    ToolkitVersion,
    Where,
)

if TYPE_CHECKING:
    from .loader import load, parse

_FROM_LOADER = ("load", "parse")


def __getattr__(name: str) -> Any:
    if name in _FROM_LOADER:
        from . import loader

        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EVERYTHING", "Accelerator", "AllowRule", "CiSettings", "Exclude",
    "Filters", "ImageKind", "ImageSpec", "Matrix", "OsSpec", "Product", "ToolkitVersion", "Where",
    "check_build_id", "check_filters", "expand", "image_name", "index_layout", "load",
    "matching", "parse", "version_matches",
]
