"""The offline side of `mirror`: one OCI image layout holding every image of a release, one
ref per image (`PATH:TAG`, e.g. `base-images/cuda-12.8-el9.6:3.0-175`), plus
`aipcc-mirror.json` naming the registry the images came from (schema 1). `dir:PATH` is that
layout as a directory; `oci-archive:FILE` is the same layout as one tar, written atomically.
The one module that reads and writes both.

The signatures and attestations of each image travel in the same layout, as a registry
without the referrers API holds them: each sigstore attachment under the ref
`PATH:sha256-<hex>.sig`, each referrers index under `PATH:sha256-<hex>` (the OCI referrers
tag schema), the artifacts it lists as blobs (`LayoutStore`). Those refs name no image."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError
from ..fsutil import output, write_atomic
from ..oci import OCI_MANIFEST, REF_NAME_ANNOTATION
from ..tools.oci_registry import MAX_BLOB, Reply, digest_of

META = "aipcc-mirror.json"
META_SCHEMA = 1


def _descriptors(index: Any) -> dict[str, dict[str, Any]]:
    """Ref name -> the descriptor of every ref of a parsed index.json."""
    found = {}
    for entry in index.get("manifests", []) if isinstance(index, dict) else []:
        annotations = entry.get("annotations") if isinstance(entry, dict) else None
        name = annotations.get(REF_NAME_ANNOTATION) if isinstance(annotations, dict) else None
        if isinstance(name, str) and name and isinstance(entry.get("digest"), str):
            found[name] = entry
    return found


def _refs(index: Any) -> dict[str, str]:
    """Ref name -> digest of every image (no attachment) of a parsed index.json."""
    return {name: entry["digest"] for name, entry in _descriptors(index).items()
            if not is_attachment(name)}


def _index(layout: Path) -> Any:
    """The layout's index.json parsed (None when there is none)."""
    try:
        return json.loads((layout / "index.json").read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise InputError(f"not an OCI layout: index.json: {exc}", file=str(layout)) from None


def refs(layout: Path) -> dict[str, str]:
    """Ref name -> digest of every image in the layout directory (empty when none)."""
    return _refs(_index(layout))


_ATTACHMENT_TAG = re.compile(r"sha256-[0-9a-f]{64}(\.sig)?")
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


def is_attachment(ref: str) -> bool:
    """Whether REF (`PATH:TAG`) names a sigstore attachment or a referrers index."""
    return _ATTACHMENT_TAG.fullmatch(ref.rpartition(":")[2]) is not None


class LayoutStore:
    """The layout at ROOT read and written as a registry without the referrers API (see
    the module): a repository's tag is the ref `REPOSITORY:TAG`, every manifest and blob a
    file under blobs/, which the repositories share."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = str(root)

    def _blob(self, digest: str) -> Path:
        if not _SHA256.fullmatch(digest):
            raise InputError(f"'{digest}' is not a sha256 digest", file=str(self.root))
        return self.root / "blobs" / "sha256" / digest.partition(":")[2]

    def _read(self, digest: str) -> Optional[bytes]:
        path = self._blob(digest)
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_BLOB + 1)
        except FileNotFoundError:
            return None
        if len(data) > MAX_BLOB or digest_of(data) != digest:
            raise InputError(f"the blob {digest} holds other bytes", file=str(path))
        return data

    def get_manifest(self, repository: str, reference: str
                     ) -> Optional[tuple[bytes, str]]:
        media_type = ""
        if not reference.startswith("sha256:"):
            entry = _descriptors(_index(self.root)).get(f"{repository}:{reference}")
            if entry is None:
                return None
            reference, media_type = entry["digest"], str(entry.get("mediaType") or "")
        data = self._read(reference)
        if data is None:
            return None
        with contextlib.suppress(ValueError, AttributeError):
            media_type = json.loads(data).get("mediaType") or media_type
        return data, media_type or OCI_MANIFEST

    def get_blob(self, repository: str, digest: str) -> bytes:
        data = self._read(digest)
        if data is None:
            raise InputError(f"the layout has no blob {digest}", file=str(self._blob(digest)))
        return data

    def put_blob(self, repository: str, data: bytes) -> str:
        digest = digest_of(data)
        path = self._blob(digest)
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
        return digest

    def put_blobs(self, repository: str, blobs: Sequence[bytes]) -> None:
        for data in blobs:
            self.put_blob(repository, data)

    def put_manifest(self, repository: str, reference: str, body: bytes,
                     media_type: str) -> Reply:
        """BODY as a blob; by tag, the ref `REPOSITORY:REFERENCE` in index.json too."""
        digest = self.put_blob(repository, body)
        if not reference.startswith("sha256:"):
            name = f"{repository}:{reference}"
            index = _index(self.root)
            if index is None:
                index = {"schemaVersion": 2, "manifests": []}
            if not isinstance(index, dict) or not isinstance(index.get("manifests", []), list):
                raise InputError("not an OCI layout: index.json is no image index",
                                 file=str(self.root))
            replaced = _descriptors(index).get(name)
            index["manifests"] = [m for m in index.get("manifests", []) if m is not replaced]
            index["manifests"].append({"mediaType": media_type, "digest": digest,
                                       "size": len(body),
                                       "annotations": {REF_NAME_ANNOTATION: name}})
            write_atomic(self.root / "index.json", json.dumps(index, indent=1) + "\n")
        return Reply(201, {}, b"")

    def referrers(self, repository: str, digest: str) -> Optional[list[dict[str, Any]]]:
        return None  # no API: the referrers tag


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
