"""Small real wheel files for the index tests: a zip with a .dist-info (METADATA, WHEEL,
RECORD) and any other members asked for; a PEP 503 tree that offers them."""

from __future__ import annotations

import hashlib
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


def simple_index(root: Path, wheels: list[Path]) -> None:
    """A PEP 503 index over WHEELS with PEP 658 metadata beside each wheel: pip and uv read
    a candidate's dependencies without downloading it."""
    by_project: dict[str, list[Path]] = {}
    for wheel in wheels:
        name = wheel.name.split("-")[0].replace("_", "-").lower()
        by_project.setdefault(name, []).append(wheel)
    files = root / "files"
    files.mkdir(parents=True)
    for project, found in by_project.items():
        links = []
        for wheel in found:
            (files / wheel.name).symlink_to(wheel.resolve())
            with zipfile.ZipFile(wheel) as archive:
                metadata = next(archive.read(n) for n in archive.namelist()
                                if n.endswith(".dist-info/METADATA"))
            (files / f"{wheel.name}.metadata").write_bytes(metadata)
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            meta = hashlib.sha256(metadata).hexdigest()
            links.append(f'<a href="../../files/{wheel.name}#sha256={digest}" '
                         f'data-dist-info-metadata="sha256={meta}" '
                         f'data-core-metadata="sha256={meta}">{wheel.name}</a><br>')
        page = root / "simple" / project
        page.mkdir(parents=True)
        (page / "index.html").write_text("<html><body>\n" + "\n".join(links)
                                         + "\n</body></html>\n")
