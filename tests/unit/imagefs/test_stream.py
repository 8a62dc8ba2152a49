"""A layer blob's digest is computed in a thread beside the read: it covers the blob's
window and nothing else, it notices a blob that is not what its name says, and no thread
outlives the read, whether the read ends well or not."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import tarfile
import threading
from pathlib import Path

import pytest
import zstandard

from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
from aipcc_build.imagefs.stream import RefusedLayer, read_layer
from aipcc_build.imagefs.tar import TarError, TarWalker


def _layer(size: int) -> bytes:
    """A gzip layer holding one file of SIZE incompressible bytes (stored: level 1 spent a
    second and a half failing to compress 64 MB, for the same size)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        member = tarfile.TarInfo("opt/data.bin")
        member.size = size
        archive.addfile(member, io.BytesIO(os.urandom(size)))
    return gzip.compress(out.getvalue(), compresslevel=0)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _drain(stream) -> None:  # type: ignore[no-untyped-def]
    while stream.read(1 << 20):
        pass


def test_the_digest_covers_the_blobs_window_in_a_larger_file(tmp_path: Path) -> None:
    """A docker-archive member: the blob is a window of the archive file."""
    blob = _layer(3 << 20)
    archive = tmp_path / "archive"
    archive.write_bytes(b"x" * 1000 + blob + b"y" * 1000)
    location = BlobLocation(str(archive), 1000, len(blob))
    read = read_layer(LayerJob(_digest(blob), "", location), _drain)
    assert read.diff_id == _digest(gzip.decompress(blob))


def test_a_blob_that_is_not_what_its_name_says_is_refused(tmp_path: Path) -> None:
    blob, other = _layer(1 << 20), _layer(1 << 20)
    path = tmp_path / "blob"
    path.write_bytes(blob)
    with pytest.raises(TarError, match="does not match its digest"):
        read_layer(LayerJob(_digest(other), "", BlobLocation(str(path))), _drain)


def test_no_digest_thread_outlives_a_read_that_fails_early(tmp_path: Path) -> None:
    """A walk that gives up after the first megabyte of a large blob: the digest thread is
    stopped, not left hashing the rest."""
    blob = _layer(64 << 20)
    path = tmp_path / "blob"
    path.write_bytes(blob)
    before = {t.ident for t in threading.enumerate()}

    def give_up(stream) -> None:  # type: ignore[no-untyped-def]
        stream.read(1 << 20)
        raise TarError("the walk refused the layer")

    with pytest.raises(TarError, match="refused the layer"):
        read_layer(LayerJob(_digest(blob), "", BlobLocation(str(path))), give_up)
    assert [t.name for t in threading.enumerate() if t.ident not in before] == []
    read_layer(LayerJob(_digest(blob), "", BlobLocation(str(path))), _drain)
    assert [t.name for t in threading.enumerate() if t.ident not in before] == []


def test_a_window_past_the_end_of_its_file_is_refused_not_waited_for(tmp_path: Path) -> None:
    """A manifest may claim more bytes than the file holds (a truncated download, a lying
    archive index): the digest thread stops at the end of the file and the blob does not
    match its name."""
    blob = _layer(1 << 20)
    path = tmp_path / "blob"
    path.write_bytes(blob)
    location = BlobLocation(str(path), 0, len(blob) + (8 << 20))
    with pytest.raises(TarError, match="does not match its digest"):
        read_layer(LayerJob(_digest(blob + b"\0" * (8 << 20)), "", location), _drain)


def _tar() -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        member = tarfile.TarInfo("usr/local/cuda-12.8/version.json")
        member.size = 5
        archive.addfile(member, io.BytesIO(b"12.8\n"))
    return out.getvalue()


def _read(tmp_path: Path, blob: bytes) -> tuple[str, list[str]]:
    """(diffID, member names) of BLOB read as a layer."""
    path = tmp_path / "blob"
    path.write_bytes(blob)
    names: list[str] = []

    def walk(stream) -> None:  # type: ignore[no-untyped-def]
        names.extend(e.name.decode() for e in TarWalker(stream))

    read = read_layer(LayerJob(_digest(blob), "", BlobLocation(str(path))), walk)
    return read.diff_id, names


COMPRESSORS = {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress,
               "zstd": lambda data: zstandard.ZstdCompressor().compress(data)}


@pytest.mark.parametrize("codec", sorted(COMPRESSORS))
def test_compression_is_detected_by_magic_and_streams_may_follow_each_other(
        tmp_path: Path, codec: str) -> None:
    """containers/image reads an xz or bzip2 layer whatever its media type says, and every
    concatenated stream of it."""
    tar = _tar()
    compress = COMPRESSORS[codec]
    blob = compress(tar[:512]) + compress(tar[512:])
    assert _read(tmp_path, blob) == (_digest(tar), ["usr/local/cuda-12.8/version.json"])


@pytest.mark.parametrize("codec", ["gzip", "bzip2", "xz", "zstd"])
@pytest.mark.parametrize("tail", [b"\0" * 16, b"\0", b"garbage!", b"\x1f", b"\x28\xb5"])
def test_bytes_after_the_compressed_stream_are_refused_as_the_engine_refuses_them(
        tmp_path: Path, codec: str, tail: bytes) -> None:
    """Go's gzip reader reads a header after each member: zeros are "invalid header",
    where Python's readers skip them."""
    with pytest.raises(RefusedLayer, match="refused by the container engine"):
        _read(tmp_path, COMPRESSORS[codec](_tar()) + tail)


def test_a_truncated_compressed_stream_is_refused(tmp_path: Path) -> None:
    for compress in COMPRESSORS.values():
        blob = compress(_tar() + os.urandom(20000))
        with pytest.raises(RefusedLayer):
            _read(tmp_path, blob[:len(blob) // 2])


@pytest.mark.parametrize(("window_log", "read"), [(28, True), (30, False)])
def test_zstd_windows_are_read_up_to_the_engines_limit(tmp_path: Path, window_log: int,
                                                       read: bool) -> None:
    """klauspost/compress decodes windows up to 512 MiB; the zstd library stops at 128 MiB
    unless told otherwise."""
    params = zstandard.ZstdCompressionParameters(window_log=window_log)
    compressor = zstandard.ZstdCompressor(compression_params=params)
    out = io.BytesIO()
    with compressor.stream_writer(out, closefd=False) as writer:  # no content size
        writer.write(_tar())
    if read:
        assert _read(tmp_path, out.getvalue())[1] == ["usr/local/cuda-12.8/version.json"]
    else:
        with pytest.raises(RefusedLayer, match="zstd"):
            _read(tmp_path, out.getvalue())
