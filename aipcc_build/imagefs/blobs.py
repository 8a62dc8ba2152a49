"""Where a layer's bytes are: small and picklable, so workers can open them themselves."""

from __future__ import annotations

from typing import Optional, Union

from ..records import record


@record
class BlobLocation:
    """A byte range of a local file: a whole blob file, or a member of an archive."""

    path: str
    offset: int = 0
    length: Optional[int] = None  # None: to the end of the file


@record
class TarSplitLayer:
    """A layer applied in containers/storage: its tar-split (every tar byte but the file
    contents) and the directory holding its files."""

    tar_split: str  # <graphroot>/<driver>-layers/<id>.tar-split.gz
    files: str  # overlay: <graphroot>/overlay/<id>/diff; vfs: <graphroot>/vfs/dir/<id>
    size: int  # of the uncompressed tar


@record
class LayerJob:
    digest: str
    media_type: str
    location: Union[BlobLocation, TarSplitLayer]
