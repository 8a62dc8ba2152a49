"""Small real wheel files for the index tests: a zip with a .dist-info (METADATA, WHEEL,
RECORD) and any other members asked for."""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional


def make_wheel(directory: Path, name: str, version: str, *, requires: Sequence[str] = (),
               requires_python: Optional[str] = None, files: Mapping[str, bytes] = {},
               tag: str = "py3-none-any") -> Path:
    """NAME-VERSION-TAG.whl in DIRECTORY (created), with its core metadata."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{name.replace('-', '_')}-{version}"
    dist_info = f"{stem}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python:
        metadata.append(f"Requires-Python: {requires_python}")
    metadata += [f"Requires-Dist: {r}" for r in requires]
    path = directory / f"{stem}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
        archive.writestr(f"{dist_info}/METADATA", "\n".join(metadata) + "\n")
        archive.writestr(f"{dist_info}/WHEEL",
                         f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n")
        archive.writestr(f"{dist_info}/RECORD", "")
    return path
