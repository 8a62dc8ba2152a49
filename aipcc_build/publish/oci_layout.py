"""The offline side of `mirror`: one OCI image layout holding every image of a release, one
ref per image (`PATH:TAG`, e.g. `base-images/cuda-12.8-el9.6:3.0-175`), plus
`aipcc-mirror.json` naming the registry the images came from (schema 1). `dir:PATH` is that
layout as a directory; `oci-archive:FILE` is the same layout as one tar, written atomically.
The one module that reads and writes both."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError
from ..fsutil import output, write_atomic
from ..oci import REF_NAME_ANNOTATION

META = "aipcc-mirror.json"
META_SCHEMA = 1


def _refs(index: Any) -> dict[str, str]:
    refs = {}
    for entry in index.get("manifests", []) if isinstance(index, dict) else []:
        name = (entry.get("annotations") or {}).get(REF_NAME_ANNOTATION)
        if name and isinstance(entry.get("digest"), str):
            refs[name] = entry["digest"]
    return refs


def refs(layout: Path) -> dict[str, str]:
    """Ref name -> digest of every image in the layout directory (empty when none)."""
    try:
        return _refs(json.loads((layout / "index.json").read_text()))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise InputError(f"not an OCI layout: index.json: {exc}", file=str(layout)) from None


def archive_refs(archive: Path) -> dict[str, str]:
    """Ref name -> digest in an oci-archive, read from its index.json without unpacking."""
    import tarfile  # here: a mirror into a registry never opens a tar

    try:
        with tarfile.open(archive) as tar:
            member = tar.extractfile("index.json")
            return _refs(json.load(member)) if member else {}
    except FileNotFoundError:
        return {}
    except (tarfile.TarError, KeyError, ValueError) as exc:
        raise InputError(f"not an OCI archive: {exc}", file=str(archive)) from None


def source_registry(layout: Path) -> Optional[str]:
    try:
        value = json.loads((layout / META).read_text()).get("source_registry")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def write_meta(layout: Path, registry: str) -> None:
    write_atomic(layout / META, json.dumps({"schema": META_SCHEMA,
                                            "source_registry": registry}, indent=2) + "\n")


def unpack(archive: Path, into: Path) -> None:
    import tarfile

    into.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
    except tarfile.TarError as exc:
        raise InputError(f"not an OCI archive: {exc}", file=str(archive)) from None


def pack(layout: Path, archive: Path) -> None:
    """Tar LAYOUT into ARCHIVE through the one safe writer: a reader sees the old archive
    or the new one (a stream, "w|": a FIFO or /dev/stdout takes it as well)."""
    import tarfile

    with output(archive) as handle, tarfile.open(fileobj=handle, mode="w|") as tar:
        for entry in sorted(os.listdir(layout)):
            tar.add(layout / entry, arcname=entry)


def remove(layout: Path) -> None:
    shutil.rmtree(layout, ignore_errors=True)
