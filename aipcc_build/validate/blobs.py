"""Where a layer blob's bytes are: small and picklable, so workers can open it themselves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class BlobLocation:
    """A byte range of a local file: a whole blob file, or a member of an archive."""

    path: str
    offset: int = 0
    length: Optional[int] = None  # None: to the end of the file


@dataclass(frozen=True)
class LayerJob:
    digest: str
    media_type: str
    location: BlobLocation
