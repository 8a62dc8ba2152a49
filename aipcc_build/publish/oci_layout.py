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
import hashlib
import json
import os
import posixpath
import re
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Optional

from ..errors import CheckFailed, InputError
from ..fsutil import NotRegularFile, open_regular, output, same_content, write_atomic
from ..oci import OCI_MANIFEST, REF_NAME_ANNOTATION, load_json
from ..tools.oci_registry import MAX_BLOB, Reply, digest_of
from ..tools.registry_http import MAX_MANIFEST

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
    """The layout's index.json parsed (None when there is none); a link or anything but a
    regular file there is refused, never read through (a FIFO would hang the read)."""
    path = layout / "index.json"
    try:
        if os.path.islink(path):
            raise NotRegularFile(0, "not a regular file (a symbolic link)", str(path))
        with open_regular(path) as handle:
            return load_json(handle.read())
    except FileNotFoundError:
        return None
    except NotRegularFile as exc:
        raise InputError(f"{exc.strerror} where the layout keeps index.json: move it away",
                         file=str(path)) from None
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


def unsigned(layout: Path) -> list[str]:
    """The refs of the layout's images without their sigstore signature ref beside them
    (`PATH:sha256-<hex>.sig` for the image's digest), sorted."""
    found = _descriptors(_index(layout))
    return sorted(ref for ref, entry in found.items() if not is_attachment(ref) and
                  f"{ref.rpartition(':')[0]}:{entry['digest'].replace(':', '-')}.sig"
                  not in found)


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
        handle = _open_blob(path)
        if handle is None:
            return None
        with handle:
            data = handle.read(MAX_BLOB + 1)
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
            media_type = load_json(data).get("mediaType") or media_type
        return data, media_type or OCI_MANIFEST

    def get_blob(self, repository: str, digest: str, max_size: int = MAX_BLOB) -> bytes:
        """DIGEST's bytes, at most MAX_SIZE of them (InputError naming the file else)."""
        data = self._read(digest)
        if data is None:
            raise InputError(f"the layout has no blob {digest}", file=str(self._blob(digest)))
        if len(data) > max_size:
            raise InputError(f"the blob {digest} is larger than {max_size} bytes",
                             file=str(self._blob(digest)))
        return data

    def put_blob(self, repository: str, data: bytes) -> str:
        """DATA under its digest's name, read back; a file there already is kept only when
        it holds those bytes (one with others is no blob of that digest: replaced)."""
        digest = digest_of(data)
        path = self._blob(digest)
        if _holds(path, digest):
            return digest
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(path, data)
        if not _holds(path, digest):
            raise CheckFailed(f"{path}: the blob {digest} does not read back as written")
        return digest

    def put_blobs(self, repository: str, blobs: Sequence[bytes]) -> None:
        for data in blobs:
            self.put_blob(repository, data)

    def put_manifest(self, repository: str, reference: str, body: bytes,
                     media_type: str) -> Reply:
        """BODY as a blob; by tag, the ref `REPOSITORY:REFERENCE` in index.json too."""
        digest = self.put_blob(repository, body)
        if not reference.startswith("sha256:"):
            set_ref(self.root, f"{repository}:{reference}",
                    {"mediaType": media_type, "digest": digest, "size": len(body)})
        return Reply(201, {}, b"")

    def referrers(self, repository: str, digest: str) -> Optional[list[dict[str, Any]]]:
        return None  # no API: the referrers tag


def set_ref(layout: Path, name: str, descriptor: dict[str, Any]) -> None:
    """The ref NAME in LAYOUT's index.json set to DESCRIPTOR (its annotation added), the
    index written atomically and read back."""
    index = _index(layout)
    if index is None:
        index = {"schemaVersion": 2, "manifests": []}
    if not isinstance(index, dict) or not isinstance(index.get("manifests", []), list):
        raise InputError("not an OCI layout: index.json is no image index", file=str(layout))
    replaced = _descriptors(index).get(name)
    entry = dict(descriptor)
    entry["annotations"] = {**(descriptor.get("annotations") or {}), REF_NAME_ANNOTATION: name}
    index["manifests"] = [m for m in index.get("manifests", []) if m is not replaced] + [entry]
    _write(layout / "index.json", json.dumps(index, indent=1) + "\n")
    if _descriptors(_index(layout)).get(name, {}).get("digest") != entry["digest"]:
        raise CheckFailed(f"{layout}/index.json does not read back with {name} at "
                          f"{entry['digest']}")


LAYOUT_VERSION = '{"imageLayoutVersion": "1.0.0"}\n'
_STAGE_PREFIX = ".aipcc-stage-"


def check_destination(layout: Path) -> None:
    """LAYOUT as a place a mirror may write, before the first write: absent, an empty
    directory, or an OCI layout (it holds `oci-layout`) whose index.json, oci-layout,
    aipcc-mirror.json and blobs are regular files and blobs/ a directory, none of them a
    link. Anything else is refused (InputError naming it): a link or a FIFO is never
    written through, a directory of other files never filled with a layout."""
    if os.path.lexists(layout) and not _is(layout, stat.S_ISDIR):
        raise InputError("not a directory (a link, a file or a device) where the OCI "
                         "layout goes: move it away", file=str(layout))
    if not layout.exists():
        return
    entries = [e for e in os.listdir(layout) if not e.startswith(_STAGE_PREFIX)]
    if entries and "oci-layout" not in entries:
        raise InputError("neither empty nor an OCI layout (no oci-layout file): a mirror "
                         "writes only into its own layout", file=str(layout))
    for name in ("oci-layout", "index.json", META):
        if os.path.lexists(layout / name) and not _is(layout / name, stat.S_ISREG):
            raise InputError("not a regular file where the layout keeps one: move it away",
                             file=str(layout / name))
    blobs = layout / "blobs"
    for directory in (blobs, blobs / "sha256"):
        if os.path.lexists(directory) and not _is(directory, stat.S_ISDIR):
            raise InputError("not a directory where the layout keeps its blobs: move it "
                             "away", file=str(directory))
    if (blobs / "sha256").is_dir():
        for blob in os.scandir(blobs / "sha256"):
            if not blob.is_file(follow_symlinks=False):
                raise InputError("not a regular file where the layout keeps a blob: move "
                                 "it away", file=blob.path)


def _is(path: Path, kind: Any) -> bool:
    """Whether PATH itself (a link is not followed) is of KIND (stat.S_ISDIR...)."""
    return bool(kind(os.lstat(path).st_mode))


def _write(path: Path, data: Any) -> None:
    """DATA written atomically at PATH, inside a layout: what is there and is not a regular
    file (a link, a FIFO, a device) is refused, never written through."""
    if os.path.lexists(path) and not _is(path, stat.S_ISREG):
        raise InputError("not a regular file where the layout keeps one: move it away",
                         file=str(path))
    write_atomic(path, data)


def _open_blob(path: Path) -> Optional[BinaryIO]:
    """The blob file PATH opened (None when absent); InputError when it is a link or no
    regular file: never followed out of the layout, a FIFO never waited on."""
    try:
        if not os.path.islink(path):
            return open_regular(path)
    except FileNotFoundError:
        return None
    except NotRegularFile:
        pass
    raise InputError("not a regular file where the layout keeps a blob: move it away",
                     file=str(path))


def _holds(path: Path, digest: str) -> bool:
    """Whether the regular file PATH holds bytes whose digest is DIGEST (False when absent
    or other bytes; InputError when it is no regular file)."""
    handle = _open_blob(path)
    if handle is None:
        return False
    algorithm, _, want = digest.partition(":")
    with handle:
        return _hashed(handle, algorithm)[0] == want


def _hashed(stream: Any, algorithm: str, keep: int = 0) -> tuple[str, bytes]:
    """(the hex digest under ALGORITHM of what STREAM holds, its bytes when they are at
    most KEEP, else b""), read in 1 MiB chunks into one buffer."""
    hasher = hashlib.new(algorithm)
    chunk = bytearray(1 << 20)
    view = memoryview(chunk)
    kept = bytearray()
    while size := stream.readinto(chunk):
        hasher.update(view[:size])
        if len(kept) + size <= keep:
            kept += view[:size]
        else:
            keep = 0
            kept.clear()
    return hasher.hexdigest(), bytes(kept)


def damaged_blobs(layout: Path, digest: str) -> list[str]:
    """The blobs of the image DIGEST in LAYOUT (its manifest, or its index and each
    platform's, their configs and layers) that are missing or hold other bytes, each
    hashed: what skopeo finds there under a blob's name it takes as that blob without
    reading it, and a file of the right size with other bytes (a damaged or tampered
    layout) was taken by its size alone and published. InputError naming the path where
    a blob's name is no regular file (a link, a directory, a device)."""
    def path(blob: str) -> Path:
        return layout / "blobs" / "sha256" / blob.partition(":")[2]

    return _damaged(digest, lambda blob: _holds(path(blob), blob),
                    lambda blob: path(blob).read_bytes())


def _damaged(digest: str, holds: Callable[[str], bool],
             document: Callable[[str], Optional[bytes]]) -> list[str]:
    """The blobs of the image DIGEST (walked from its manifest or index through each
    platform's to their configs and layers) that HOLDS says are missing or other bytes;
    DOCUMENT gives a manifest's or an index's bytes (None: not kept, so damaged: a check
    that walked nothing below it is no pass)."""
    damaged: list[str] = []
    seen: set[str] = set()

    def walk(descriptor: dict[str, Any], manifest: bool) -> None:
        blob = descriptor.get("digest")
        if not isinstance(blob, str) or blob in seen or not _SHA256.fullmatch(blob):
            return
        seen.add(blob)
        if not holds(blob):
            damaged.append(blob)
            return
        if manifest:
            with contextlib.suppress(ValueError, OSError):
                data = document(blob)
                if data is None:  # not read: what it names is not known to be there
                    damaged.append(blob)
                    return
                parsed = load_json(data)
                if isinstance(parsed, dict):
                    for child in parsed.get("manifests") or []:
                        if isinstance(child, dict):
                            walk(child, True)
                    for child in [parsed.get("config")] + list(parsed.get("layers") or []):
                        if isinstance(child, dict):
                            walk(child, False)

    walk({"digest": digest}, True)
    return damaged


def replace_blobs(stage: Path, layout: Path) -> None:
    """The blobs a copy wrote into STAGE (a stage of its own blobs) moved into LAYOUT where
    LAYOUT has none under their names or a regular file of other bytes, each read back in
    the stage first and moved in one rename: a reader sees the damaged file or the blob,
    never a missing one. A link, a directory or a device under a blob's name is refused
    (InputError naming it), never replaced. This changes no publication: a blob's name is
    its content's digest, so the only bytes it may hold are the ones published under it;
    a file with others is no blob of it, and the rename puts back what was published."""
    for entry in sorted(os.listdir(stage / "blobs" / "sha256")):
        digest = f"sha256:{entry}"
        there = layout / "blobs" / "sha256" / entry
        if not _SHA256.fullmatch(digest) or _holds(there, digest):
            continue
        copied = stage / "blobs" / "sha256" / entry
        if not _holds(copied, digest):
            raise CheckFailed(f"{copied}: the blob {digest} does not read back as copied")
        os.replace(copied, there)


@contextlib.contextmanager
def locked(layout: Path) -> Iterator[None]:
    """LAYOUT written by this run alone (an exclusive flock on its directory), else
    CheckFailed: two runs each set index.json from what they read before the other's
    write, and the refs of one were lost. Locked, the stages a killed run left (and only
    such) are removed."""
    import fcntl

    fd = os.open(layout, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CheckFailed(f"{layout}: another mirror is writing this layout: run "
                              "again when it has ended") from None
        for entry in os.listdir(layout):  # the stages a killed run left
            if entry.startswith(_STAGE_PREFIX):
                shutil.rmtree(layout / entry, ignore_errors=True)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def staging(layout: Path, *, shared: bool = True) -> Iterator[Path]:
    """A layout inside LAYOUT for skopeo to copy one image into, sharing LAYOUT's blobs/
    (skopeo writes a blob through a temporary file it renames, but index.json in place:
    killed while it writes, it would leave LAYOUT's index half written), or, not SHARED,
    with blobs of its own (every blob written again there: `replace_blobs`). `adopt` moves
    the ref into LAYOUT's index.json, atomically; a stage a killed run left is removed by
    the next one (`locked`)."""
    import tempfile

    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    if not (layout / "oci-layout").exists():
        _write(layout / "oci-layout", LAYOUT_VERSION)
    stage = Path(tempfile.mkdtemp(prefix=_STAGE_PREFIX, dir=layout))
    try:
        if shared:
            os.symlink(os.path.join("..", "blobs"), stage / "blobs")
        else:
            (stage / "blobs" / "sha256").mkdir(parents=True)
        write_atomic(stage / "oci-layout", LAYOUT_VERSION)
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def adopt(stage: Path, layout: Path, name: str) -> None:
    """The ref NAME skopeo wrote into STAGE set in LAYOUT's index.json."""
    descriptor = _descriptors(_index(stage)).get(name)
    if descriptor is None:
        raise CheckFailed(f"{stage}: the copy wrote no ref {name}")
    set_ref(layout, name, descriptor)


def is_stream(archive: Path) -> bool:
    """Whether ARCHIVE is (or links to) a FIFO or a character device (a pipe or terminal
    behind /dev/stdout too): written into as a stream, never read or replaced."""
    try:
        mode = os.stat(archive).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def archive_refs(archive: Path) -> dict[str, str]:
    """Ref name -> digest in an oci-archive, read from its index.json without unpacking;
    none from a FIFO or a character device (written into as a stream, never read)."""
    import tarfile  # here: a mirror into a registry never opens a tar

    try:
        handle = open_regular(archive)
    except FileNotFoundError:
        return {}
    except NotRegularFile as exc:
        if is_stream(archive):
            return {}
        raise InputError(f"{exc.strerror} where the archive goes: move it away",
                         file=str(archive)) from None
    try:
        with handle, tarfile.open(fileobj=handle) as tar:
            member = tar.extractfile("index.json")
            return _refs(json.load(member)) if member else {}
    except (tarfile.TarError, KeyError, ValueError) as exc:
        raise InputError(f"not an OCI archive: {exc}", file=str(archive)) from None


def source_registry(layout: Path) -> Optional[str]:
    try:
        value = json.loads((layout / META).read_text()).get("source_registry")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def write_meta(layout: Path, registry: str) -> None:
    """aipcc-mirror.json naming REGISTRY (left as it is when it does already)."""
    text = json.dumps({"schema": META_SCHEMA, "source_registry": registry}, indent=2) + "\n"
    if not same_content(layout / META, text):
        _write(layout / META, text)


def unpack(archive: Path, into: Path) -> None:
    """ARCHIVE extracted INTO (its members of one name: the last wins, as in skopeo's
    reader, which extracts too). Only regular files and directories are made, each through
    tarfile's `data` filter (a member leaving INTO is refused); a link, a device or a FIFO
    is dropped, never made nor followed, as is a directory under a blob's name, and what a
    member of its name made before goes too: that blob is then missing, and copied again."""
    import tarfile

    def regular(member: tarfile.TarInfo, path: str) -> Optional[tarfile.TarInfo]:
        if member.isreg() or (member.isdir() and _blob_member(member.name) is None):
            return tarfile.data_filter(member, path)
        name = _member_path(member.name)
        if name is not None:  # what a member of its name made before goes: the last wins
            with contextlib.suppress(FileNotFoundError, IsADirectoryError,
                                     NotADirectoryError):
                os.unlink(os.path.join(path, name))
        return None

    into.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter=regular)
    except tarfile.TarError as exc:
        raise InputError(f"not an OCI archive: {exc}", file=str(archive)) from None


_BLOB_MEMBER = re.compile(r"blobs/sha256/([0-9a-f]{64})")
# The JSON blobs `archive_damaged` keeps for its walk, at most, all told (a release's
# manifests and indexes are a few kilobytes each): an archive of many JSON blobs of up to
# MAX_MANIFEST each is not held whole; past it, what is not kept counts as damaged (the
# archive is then unpacked and completed, its blobs hashed on disk).
MAX_KEPT = 64 * 1024 * 1024


def _member_path(name: str) -> Optional[str]:
    """The path a tar member of NAME extracts to below the layout (`./`, `//` or a leading
    `/` read as extraction reads them); None when it leaves the layout (`..`)."""
    path = posixpath.normpath(name.lstrip("/"))
    return None if path == ".." or path.startswith("../") else path


def _blob_member(name: str) -> Optional[str]:
    """The hex digest of the blob a tar member of NAME is (`blobs/sha256/<hex>`), else
    None."""
    found = _BLOB_MEMBER.fullmatch(_member_path(name) or "")
    return found.group(1) if found else None


def archive_damaged(archive: Path, digests: Sequence[str]) -> list[str]:
    """The blobs the images DIGESTS need in ARCHIVE (each index, its manifests, their
    configs and layers) that it does not hold as a regular member of those bytes under
    their name, the last member of a name counting (skopeo's reader extracts the tar:
    the last one wins). Read once, front to back, nothing extracted: each blob hashed in
    chunks, only JSON blobs up to MAX_MANIFEST (manifests, indexes) kept for the walk,
    MAX_KEPT of them all told.
    InputError naming ARCHIVE when it is no tar, is cut short inside a member (a
    truncated copy, a member declaring more bytes than follow), or a member's path leaves
    the layout (`..`)."""
    import tarfile

    holds: dict[str, bool] = {}
    documents: dict[str, bytes] = {}
    kept_total = 0
    try:
        handle = open_regular(archive)
        with handle, tarfile.open(fileobj=handle) as tar:
            for member in tar:
                if _member_path(member.name) is None:
                    raise InputError(f"not an OCI archive: the member {member.name!r} "
                                     "leaves the layout", file=str(archive))
                blob = _blob_member(member.name)
                if blob is None:
                    continue
                holds[blob] = False
                documents.pop(blob, None)
                # An io.BufferedReader (typed IO[bytes], without its readinto).
                content: Any = tar.extractfile(member) if member.isreg() else None
                if content is None:  # a link, a device, a FIFO: no blob
                    continue
                found, kept = _hashed(content, "sha256", MAX_MANIFEST)
                holds[blob] = found == blob
                if holds[blob] and kept.lstrip()[:1] == b"{" \
                        and kept_total + len(kept) <= MAX_KEPT:
                    documents[blob] = bytes(kept)
                    kept_total += len(kept)
    except (tarfile.TarError, EOFError, NotRegularFile) as exc:
        raise InputError(f"not an OCI archive: {exc}", file=str(archive)) from None
    damaged: list[str] = []
    for digest in digests:
        damaged += [blob for blob in _damaged(digest,
                                              lambda b: holds.get(b[len("sha256:"):], False),
                                              lambda b: documents.get(b[len("sha256:"):]))
                    if blob not in damaged]
    return damaged


def pack(layout: Path, archive: Path) -> None:
    """Tar LAYOUT into ARCHIVE through the one safe writer: a reader sees the old archive
    or the new one (a stream, "w|": a FIFO or /dev/stdout takes it as well)."""
    import tarfile

    with output(archive) as handle, tarfile.open(fileobj=handle, mode="w|") as tar:
        for entry in sorted(os.listdir(layout)):
            tar.add(layout / entry, arcname=entry)


def remove(layout: Path) -> None:
    shutil.rmtree(layout, ignore_errors=True)
