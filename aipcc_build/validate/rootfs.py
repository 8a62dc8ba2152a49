"""Whether an image's config lists the layers it ships: `rootfs.diff_ids` must name, in
order, the digest of each layer's uncompressed tar. The engine refuses to store an image
whose layers do not match (containers/image checks each diffID as it unpacks); an image
whose config describes other layers than it ships is refused here too."""

from __future__ import annotations

from collections.abc import Sequence

from ..imagefs.image import PlatformImage
from .results import VIOLATION, Finding, LayerScan

WHERE = "rootfs.diff_ids"


def diff_id_findings(image: PlatformImage, scans: Sequence[LayerScan]) -> list[Finding]:
    """One violation when the config's diff_ids do not match the layers scanned."""
    listed = list((image.config.get("rootfs") or {}).get("diff_ids") or [])
    if len(listed) != len(scans):
        return [Finding(VIOLATION, "config", WHERE, f"the config lists {len(listed)} "
                        f"layers, the image ships {len(scans)}: refused",
                        component="layers")]
    for number, (diff_id, scan) in enumerate(zip(listed, scans)):
        if scan.diff_id is not None and scan.diff_id != diff_id:
            return [Finding(VIOLATION, "config", WHERE, f"layer {number + 1} is "
                            f"{scan.diff_id} uncompressed, the config says {diff_id}: "
                            "refused", component="layers", layer_digest=scan.digest)]
    return []
