"""Layer scans cached by layer digest, shared by every image that holds the layer.

A layer's bytes never change under its digest, so a scan is valid for as long as the
scanner is the same: `SCAN_FORMAT` is part of the directory name and must be bumped
whenever detection changes. Entries are written to a temporary file and renamed, so
concurrent processes see a whole entry or none.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any, Optional, Union

from ..digest import is_algorithm, is_lower_hex
from .results import REFUSED_LAYER, DeviceCode, Evidence, Hazard, IndexSetting, LayerScan

if TYPE_CHECKING:
    # A cache directory as a string or a path; the warm path loads no pathlib (issue 37:
    # pathlib and what it loads, urllib.parse and ipaddress, cost a warm validation about
    # a third of what it runs beyond `aipcc-build --version`).
    CacheDir = Union[str, os.PathLike[str]]

SCAN_FORMAT = 11


def default_cache_dir() -> str:
    configured = os.environ.get("AIPCC_BUILD_CACHE")
    return configured or os.path.join(os.path.expanduser("~"), ".cache", "aipcc-build")


def _to_json(scan: LayerScan) -> dict[str, Any]:
    return {
        "format": SCAN_FORMAT,
        "digest": scan.digest,
        "entries": scan.entries,
        "evidence": [[e.kind, e.path, e.toolkit, e.component, e.version, e.release,
                      e.distribution, e.detail, e.built] for e in scan.evidence],
        "whiteouts": list(scan.whiteouts),
        "opaque_dirs": list(scan.opaque_dirs),
        "content_paths": list(scan.content_paths),
        "members": [list(m) for m in scan.members],
        "hazards": [[h.kind, h.path, h.detail, h.severe] for h in scan.hazards],
        "index_settings": [[i.source, i.key, i.url] for i in scan.index_settings],
        "diff_id": scan.diff_id,
        "device_code": [[d.path, list(d.sass), list(d.ptx), list(d.gfx), d.detail,
                         d.distribution] for d in scan.device_code],
    }


def _from_json(data: dict[str, Any]) -> LayerScan:
    return LayerScan(
        digest=data["digest"],
        entries=int(data["entries"]),
        evidence=tuple(Evidence(*e) for e in data["evidence"]),
        whiteouts=tuple(data["whiteouts"]),
        opaque_dirs=tuple(data["opaque_dirs"]),
        content_paths=tuple(data["content_paths"]),
        members=tuple((m[0], m[1], m[2]) for m in data["members"]),
        hazards=tuple(Hazard(*h) for h in data["hazards"]),
        index_settings=tuple(IndexSetting(*i) for i in data["index_settings"]),
        diff_id=data["diff_id"],
        device_code=tuple(DeviceCode(d[0], tuple(d[1]), tuple(d[2]), tuple(d[3]), d[4], d[5])
                          for d in data["device_code"]),
    )


class LayerCache:
    def __init__(self, root: CacheDir) -> None:
        self.dir = os.path.join(root, "validate", f"layers-v{SCAN_FORMAT}")

    def _path(self, digest: str) -> Optional[str]:
        # The entry is named by the digest exactly: a digest with anything more (a trailing
        # newline, which a `$` pattern let through) has none.
        algorithm, colon, hex_part = digest.partition(":")
        if not (colon and is_algorithm(algorithm) and 32 <= len(hex_part) <= 128
                and is_lower_hex(hex_part)):
            return None
        return os.path.join(self.dir, algorithm, f"{hex_part}.json")

    def get(self, digest: str) -> Optional[LayerScan]:
        path = self._path(digest)
        if path is None:
            return None
        try:
            with open(path, "rb") as handle:
                data = json.loads(handle.read())
            scan = _from_json(data)
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing or damaged: scan again and overwrite
        return scan if data.get("format") == SCAN_FORMAT and scan.digest == digest else None

    def put(self, scan: LayerScan) -> None:
        """Store a complete scan; scans that hit read errors are not kept, nor those of a
        layer refused: a read that stops at a malformed byte never learns whether the
        blob matched its digest, and another blob may come under that digest."""
        path = self._path(scan.digest)
        if path is None or scan.error or any(h.kind == REFUSED_LAYER for h in scan.hazards):
            return
        # Imported here: a warm run writes nothing.
        from ..fsutil import write_atomic

        # A read-only or full cache only costs speed.
        with contextlib.suppress(OSError):
            write_atomic(path, json.dumps(_to_json(scan), separators=(",", ":")))
