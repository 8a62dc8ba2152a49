"""mirror into an OCI layout or archive when the destination fights back: links, FIFOs and
devices where the layout keeps a file, a directory that is no layout, a blob with other
bytes under its name, a full disk, SIGKILL in the middle of the write, and a rerun that
must rewrite nothing. Real skopeo copying between layouts (no registry: seconds), the
real command line."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Optional

import pytest

from aipcc_build.oci import REF_NAME_ANNOTATION
from aipcc_build.publish import oci_layout
from tests.support.engine import layout as image_layout
from tests.support.filesystems import device_node, tmpfs
from tests.support.processes import descendants

pytestmark = pytest.mark.integration

REF = "rel/x:1.0"


def source(root: Path, layer: bytes = b"small layer " * 100) -> tuple[str, str]:
    """A layout a previous mirror could have written: one image, ref REF. (its dir:
    reference, the digests of its manifest and its layer)."""
    image_layout(root, [layer])
    index = json.loads((root / "index.json").read_text())
    index["manifests"][0]["annotations"] = {REF_NAME_ANNOTATION: REF}
    (root / "index.json").write_text(json.dumps(index))
    (root / oci_layout.META).write_text(json.dumps({"schema": 1,
                                                    "source_registry": "quay.io/aipcc"}))
    return index["manifests"][0]["digest"], "sha256:" + hashlib.sha256(layer).hexdigest()


def mirror(cli: Callable[..., object], src: Path, to: str) -> object:
    return cli("mirror", "--from", f"dir:{src}", "--to", to)


def blob(layout: Path, digest: str) -> Path:
    return layout / "blobs" / "sha256" / digest.partition(":")[2]


def assert_whole(layout: Path, *, killed: bool = False) -> dict[str, str]:
    """LAYOUT is one a reader can trust: index.json whole, every blob its digest's bytes,
    no stage left (but by a KILLED run: the next removes it). Its refs."""
    for path in (layout / "blobs" / "sha256").iterdir():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == path.name, path
    assert killed or not [p for p in layout.iterdir() if p.name.startswith(".aipcc-stage-")]
    return oci_layout.refs(layout)


def one_line_refusal(done, code: int, *words: str) -> None:
    assert done.code == code, (done.out, done.err)
    assert "Traceback" not in done.err
    lines = [line for line in done.err.splitlines() if line.startswith("aipcc-build: error")]
    assert len(lines) == 1, done.err
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize("plant", ["index-link", "index-fifo", "blob-link", "blob-device",
                                   "oci-layout-link", "blobs-link", "meta-fifo"])
def test_a_node_that_is_no_regular_file_is_refused_never_written_through(
        tmp_path: Path, cli, plant: str) -> None:
    src = tmp_path / "src"
    digest, layer = source(src)
    dest = tmp_path / "dest"
    assert mirror(cli, src, f"dir:{dest}").code == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text('{"schemaVersion": 2, "manifests": []}')
    target = {"index-link": dest / "index.json", "index-fifo": dest / "index.json",
              "blob-link": blob(dest, layer), "blob-device": blob(dest, layer),
              "oci-layout-link": dest / "oci-layout", "blobs-link": dest / "blobs",
              "meta-fifo": dest / oci_layout.META}[plant]
    if target.is_dir():
        os.rename(target, outside / "blobs")
        os.symlink(outside / "blobs", target)
    else:
        target.unlink()
        if plant.endswith("link"):
            os.symlink(outside / "precious", target)
        elif plant.endswith("fifo"):
            os.mkfifo(target)
        else:
            os.rename(device_node(tmp_path), target)
    before = {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()}

    done = mirror(cli, src, f"dir:{dest}")  # a FIFO read would hang here
    one_line_refusal(done, 2, str(target), "move it away")
    assert {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()} == before
    assert os.path.islink(target) or not target.is_file()  # left as it was found


def test_a_directory_that_is_no_layout_is_refused_and_left_alone(tmp_path: Path,
                                                                  cli) -> None:
    src = tmp_path / "src"
    source(src)
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    one_line_refusal(mirror(cli, src, f"dir:{home}"), 2, "neither empty nor an OCI layout")
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    one_line_refusal(mirror(cli, src, f"dir:{link}"), 2, "not a directory")
    assert not (tmp_path / "elsewhere").exists()


def test_a_blob_with_other_bytes_is_copied_again_not_taken(tmp_path: Path, cli) -> None:
    """skopeo takes a file under a blob's name as that blob without reading it: a layout
    that held garbage there got an image that could not be read. Now the copy is read back,
    the garbage removed and copied again; a rerun over a blob of the wrong size does too."""
    src = tmp_path / "src"
    digest, layer = source(src)
    dest = tmp_path / "dest"
    (dest / "blobs" / "sha256").mkdir(parents=True)
    (dest / "oci-layout").write_text(oci_layout.LAYOUT_VERSION)
    blob(dest, layer).write_bytes(b"garbage")
    done = mirror(cli, src, f"dir:{dest}")
    assert done.code == 0, done.err
    assert assert_whole(dest) == {REF: digest}
    blob(dest, layer).write_bytes(b"truncated")
    again = mirror(cli, src, f"dir:{dest}")
    assert again.code == 0 and "1 copied" in again.err, again.err
    assert assert_whole(dest) == {REF: digest}


def test_a_rerun_over_a_blob_of_the_right_size_with_other_bytes_copies_it_again(
        tmp_path: Path, cli) -> None:
    """A rerun took a blob by its size alone: a layer of the right size with other bytes (a
    damaged or tampered layout) was kept, the image 'already there' and the layout, or the
    archive packed from it, published with it. Now hashed, copied again by the real skopeo
    and put in place in one rename; a directory under its name is refused, naming it."""
    src = tmp_path / "src"
    digest, layer = source(src)
    dest = tmp_path / "dest"
    assert mirror(cli, src, f"dir:{dest}").code == 0
    blob(dest, layer).write_bytes(b"T" * blob(dest, layer).stat().st_size)
    again = mirror(cli, src, f"dir:{dest}")
    assert again.code == 0 and "1 copied" in again.err, again.err
    assert assert_whole(dest) == {REF: digest}
    blob(dest, layer).unlink()
    blob(dest, layer).mkdir()
    one_line_refusal(mirror(cli, src, f"dir:{dest}"), 2, str(blob(dest, layer)))
    assert blob(dest, layer).is_dir()


def test_a_rerun_into_a_complete_layout_rewrites_nothing(tmp_path: Path, cli) -> None:
    src = tmp_path / "src"
    digest, _ = source(src)
    dest = tmp_path / "dest"
    assert mirror(cli, src, f"dir:{dest}").code == 0

    def files() -> dict[str, tuple[int, int]]:
        return {str(p.relative_to(dest)): (p.stat().st_ino, p.stat().st_mtime_ns)
                for p in dest.rglob("*") if p.is_file()}

    before = files()
    again = mirror(cli, src, f"dir:{dest}")
    assert again.code == 0 and "1 already there" in again.err, again.err
    assert files() == before  # aipcc-mirror.json was rewritten at every run
    archive = tmp_path / "release.tar"
    assert cli("mirror", "--from", f"dir:{src}", "--to", f"oci-archive:{archive}").code == 0
    stamp = archive.stat().st_ino, archive.stat().st_mtime_ns, archive.read_bytes()
    again = cli("mirror", "--from", f"dir:{src}", "--to", f"oci-archive:{archive}")
    assert again.code == 0 and "1 already there" in again.err, again.err
    assert (archive.stat().st_ino, archive.stat().st_mtime_ns, archive.read_bytes()) == stamp


def rewritten(archive: Path, change: Callable[[tarfile.TarInfo, bytes], Optional[bytes]]
              ) -> None:
    """ARCHIVE written again, each regular member's bytes as CHANGE gives them (same
    member, other bytes; None: the member as it was)."""
    with tarfile.open(archive) as tar:
        members = [(m, tar.extractfile(m).read() if m.isreg() else None)  # type: ignore[union-attr]
                   for m in tar.getmembers()]
    with tarfile.open(archive, "w") as tar:
        for member, data in members:
            if data is not None:
                data = change(member, data) or data
                member.size = len(data)
            tar.addfile(member, io.BytesIO(data) if data is not None else None)


@pytest.mark.parametrize("damage", ["other bytes", "link out"])
def test_a_rerun_over_an_archive_with_a_damaged_layer_copies_it_again(
        tmp_path: Path, cli, damage: str) -> None:
    """A rerun into an archive whose index.json lists the image at its digest was
    'skipped' whatever its blobs held: a layer changed after the archive was written (or a
    link in its place, to outside) went to the site. Now its blobs are read back: the
    layer is copied again by the real skopeo, and the real skopeo reads the archive."""
    src = tmp_path / "src"
    digest, layer = source(src)
    archive = tmp_path / "release.tar"
    assert cli("mirror", "--from", f"dir:{src}", "--to", f"oci-archive:{archive}").code == 0
    name = f"blobs/sha256/{layer.partition(':')[2]}"
    if damage == "other bytes":
        rewritten(archive, lambda m, data: b"D" * len(data) if m.name == name else None)
    else:
        with tarfile.open(archive, "a") as tar:  # the last member of a name wins
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, "../../../outside"
            tar.addfile(link)
    again = cli("mirror", "--from", f"dir:{src}", "--to", f"oci-archive:{archive}")
    assert again.code == 0 and "1 copied" in again.err, again.err
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isreg() and member.name.startswith("blobs/sha256/"):
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                assert hashlib.sha256(data).hexdigest() == member.name.rpartition("/")[2]
    subprocess.run(["skopeo", "copy", f"oci-archive:{archive}:{REF}",
                    f"dir:{tmp_path / 'read'}"], check=True, capture_output=True, timeout=120)
    assert blob(src, layer).read_bytes() == (tmp_path / "read" / layer.partition(":")[2]
                                             ).read_bytes()
    assert not os.path.lexists(tmp_path / "outside")


@pytest.mark.parametrize("damage", ["not a tar", "cut inside a member", "leaves the layout"])
def test_a_rerun_over_a_malformed_archive_is_refused_naming_it(tmp_path: Path, cli,
                                                               damage: str) -> None:
    src = tmp_path / "src"
    source(src)
    archive = tmp_path / "release.tar"
    assert cli("mirror", "--from", f"dir:{src}", "--to", f"oci-archive:{archive}").code == 0
    if damage == "not a tar":
        archive.write_text("my notes\n")
    elif damage == "cut inside a member":
        archive.write_bytes(archive.read_bytes()[:archive.read_bytes().index(b"small layer")
                                                 + 50])
    else:
        with tarfile.open(archive, "a") as tar:
            escaping = tarfile.TarInfo("blobs/../../escaped")
            escaping.size = 1
            tar.addfile(escaping, io.BytesIO(b"x"))
    before = archive.read_bytes()
    done = cli("mirror", "--from", f"dir:{src}", "--to", f"oci-archive:{archive}")
    one_line_refusal(done, 2, str(archive), "not an OCI archive")
    assert archive.read_bytes() == before
    assert not (tmp_path / "escaped").exists() and not Path(f"{archive}.partial").exists()


@contextlib.contextmanager
def drained(fifo: Path, into: Path) -> Iterator[None]:
    """A reader copying what FIFO receives INTO (stopped when nothing came)."""
    with open(into, "wb") as sink:
        reader = subprocess.Popen(["cat", str(fifo)], stdout=sink)
        try:
            yield
        finally:
            try:
                reader.wait(timeout=30)
            except subprocess.TimeoutExpired:
                reader.kill()
                reader.wait()
                raise


def test_an_archive_into_a_fifo_is_streamed_never_read(tmp_path: Path, cli) -> None:
    """The archive's old refs were read from FILE first: a FIFO with no writer hung the
    run for ever."""
    src = tmp_path / "src"
    digest, _ = source(src)
    fifo = tmp_path / "release.tar"
    os.mkfifo(fifo)
    with drained(fifo, tmp_path / "got.tar"):
        done = cli("mirror", "--from", f"dir:{src}", "--to", f"oci-archive:{fifo}")
    assert done.code == 0, done.err
    assert oci_layout.archive_refs(tmp_path / "got.tar") == {REF: digest}
    assert fifo.exists() and not fifo.is_file()


def test_an_archive_into_a_fifo_builds_its_layout_elsewhere(tmp_path: Path, cli) -> None:
    """The layout was built in FILE.partial beside the FIFO (/dev/stdout.partial for
    /dev/stdout: a release in the RAM of /dev): a FIFO on a read-only file system could not
    take an archive."""
    src = tmp_path / "src"
    digest, _ = source(src)
    with tmpfs(tmp_path / "ro") as mount:
        os.mkfifo(mount / "release.tar")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True, timeout=30)
        with drained(mount / "release.tar", tmp_path / "got.tar"):
            done = cli("mirror", "--from", f"dir:{src}", "--to",
                       f"oci-archive:{mount}/release.tar")
        assert done.code == 0, done.err
    assert oci_layout.archive_refs(tmp_path / "got.tar") == {REF: digest}


def test_a_full_disk_fails_the_image_and_leaves_the_old_layout_whole(tmp_path: Path,
                                                                     cli) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    small_digest, _ = source(small)
    source(big, os.urandom(3 << 20))  # more than the disk holds
    with tmpfs(tmp_path / "disk", "2m") as disk:
        dest = disk / "layout"
        assert mirror(cli, small, f"dir:{dest}").code == 0
        done = mirror(cli, big, f"dir:{dest}")
        assert done.code in (1, 2), done.err
        assert "Traceback" not in done.err
        assert "no space left on device" in done.err.lower(), done.err
        assert assert_whole(dest) == {REF: small_digest}
        archive = disk / "release.tar"
        done = cli("mirror", "--from", f"dir:{big}", "--to", f"oci-archive:{archive}")
        assert done.code in (1, 2) and "Traceback" not in done.err, done.err
        assert not archive.exists()


def test_sigkill_in_the_middle_leaves_the_old_layout_or_the_new_one(tmp_path: Path) -> None:
    """The mirror (and skopeo under it) killed at points through the copy: the layout read
    afterwards holds the old image or the new one, whole, every blob its digest's bytes;
    the next run completes it. skopeo writes index.json in place (O_TRUNC, then the bytes):
    it now writes into a stage whose ref is moved into index.json atomically."""
    old, new = tmp_path / "old", tmp_path / "new"
    old_digest, _ = source(old)
    new_digest, _ = source(new, os.urandom(8 << 20))
    command = [sys.executable, "-m", "aipcc_build", "mirror", "--to", f"dir:{tmp_path / 'd'}"]
    assert subprocess.run(command + ["--from", f"dir:{old}"], capture_output=True,
                          timeout=120).returncode == 0
    seen = set()
    for delay in (0.05, 0.2, 0.4, 0.6, 0.9, 1.3):
        run = subprocess.Popen(command + ["--from", f"dir:{new}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        for pid in [run.pid, *descendants(run.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        run.wait(timeout=30)
        time.sleep(0.1)  # the killed skopeo is gone
        refs = assert_whole(tmp_path / "d", killed=True)
        assert refs in ({REF: old_digest}, {REF: new_digest}), refs
        seen.add(refs[REF])
    done = subprocess.run(command + ["--from", f"dir:{new}"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert assert_whole(tmp_path / "d") == {REF: new_digest}


def test_a_second_mirror_into_a_layout_being_written_is_refused(tmp_path: Path,
                                                                 cli) -> None:
    """Two runs into one layout each set index.json from what they read before the
    other's write (the refs of one lost), and the second removed the stage the first was
    copying into. The layout is now held for the run: the second fails (exit 1), and
    touches nothing."""
    import fcntl

    src = tmp_path / "src"
    source(src)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "oci-layout").write_text(oci_layout.LAYOUT_VERSION)
    (dest / ".aipcc-stage-running").mkdir()  # the first run's, being copied into
    fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as the first run holds it
        done = mirror(cli, src, f"dir:{dest}")
    finally:
        os.close(fd)
    assert done.code == 1, done.err
    assert "another mirror is writing this layout" in done.err and "Traceback" not in done.err
    assert sorted(p.name for p in dest.iterdir()) == [".aipcc-stage-running", "oci-layout"]
    assert mirror(cli, src, f"dir:{dest}").code == 0  # the first ended (killed): its stage
    assert not (dest / ".aipcc-stage-running").exists()
