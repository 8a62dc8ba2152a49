"""The final filesystem as the engine builds it, on hand-made layers (the differential
test in tests/integration holds the same model against the real engine)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
from aipcc_build.imagefs.tar import DIRECTORY, REGULAR, SYMLINK
from aipcc_build.imagefs.tree import Entry, LayerRefused, final_tree
from aipcc_build.validate.layers import REFUSED, scan_layer
from aipcc_build.validate.scan_stack import stack_of
from tests.support.raw_tar import Member, raw_tar


def jobs(tmp_path: Path, *layers: bytes) -> list[LayerJob]:
    out = []
    for data in layers:
        digest = hashlib.sha256(data).hexdigest()
        (tmp_path / digest).write_bytes(data)
        out.append(LayerJob(f"sha256:{digest}", "", BlobLocation(str(tmp_path / digest))))
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_layers_stack_as_overlayfs_shows_them(tmp_path: Path) -> None:
    lower = raw_tar([Member(b"gone/f", data=b"1"), Member(b"opaque/old", data=b"2"),
                     Member(b"t", b"5"), Member(b"s", b"2", link=b"t")])
    upper = raw_tar([Member(b"gone/.wh.f"), Member(b"opaque/.wh..wh..opq"),
                     Member(b"opaque/new", data=b"n"), Member(b"s/f", data=b"up"),
                     Member(b"a/../../climbed", data=b"c")])
    tree = final_tree(jobs(tmp_path, lower, upper))
    assert tree == {
        "/gone": Entry(DIRECTORY, 0o755), "/opaque": Entry(DIRECTORY, 0o755),
        "/opaque/new": Entry(REGULAR, 0o644, sha(b"n")), "/t": Entry(DIRECTORY, 0o644),
        # A directory above a lower symlink hides it: the file is not written through it.
        "/s": Entry(DIRECTORY, 0o755), "/s/f": Entry(REGULAR, 0o644, sha(b"up")),
        "/climbed": Entry(REGULAR, 0o644, sha(b"c"))}


def test_within_a_layer_symlinks_are_followed_and_hard_links_share_an_inode(
        tmp_path: Path) -> None:
    layer = raw_tar([Member(b"c/x", data=b"q"), Member(b"s1", b"2", link=b"/c"),
                     Member(b"s1/through", data=b"via"), Member(b"c/x2", b"1", link=b"c/x",
                                                                  mode=0o600)])
    tree = final_tree(jobs(tmp_path, layer))
    assert tree["/c/through"] == Entry(REGULAR, 0o644, sha(b"via"))
    assert tree["/s1"] == Entry(SYMLINK, 0o777, None, "/c")
    assert tree["/c/x"] == tree["/c/x2"] == Entry(REGULAR, 0o600, sha(b"q"))


@pytest.mark.parametrize(("members", "why"), [
    ([Member(b"f", data=b"1"), Member(b"./f", data=b"2")], "second of that name"),
    ([Member(b"f", data=b"1"), Member(b"f", b"g")], "second of that name"),
    ([Member(b"f", data=b"1"), Member(b".wh.f")], "which the layer holds"),
    ([Member(b"h", b"1", link=b"nothere")], "does not hold as a file before it"),
    ([Member(b"f", b"7", data=b"x")], "tar type '7'"),
    ([Member(b"f", data=b"1"), Member(b"f/g", data=b"2")], "is not a directory"),
])
def test_what_the_engine_refuses(tmp_path: Path, members: list[Member], why: str) -> None:
    [job] = jobs(tmp_path, raw_tar(members))
    with pytest.raises(LayerRefused, match=f"^layer {job.digest}: .*{why}"):
        final_tree([job])


@pytest.mark.parametrize("members", [
    [Member(b"f", data=b"1"), Member(b"./f", data=b"2")],
    [Member(b"f", data=b"1"), Member(b".wh.f")],
    [Member(b"h", b"1", link=b"nothere")],
    [Member(b"f", b"7", data=b"x")],
])
def test_the_scan_refuses_what_the_engine_refuses(tmp_path: Path,
                                                  members: list[Member]) -> None:
    [job] = jobs(tmp_path, raw_tar(members))
    [refused] = [h for h in scan_layer(job).hazards if h.kind == REFUSED]
    assert refused.severe and refused.detail.startswith(
        f"layer {job.digest} is refused by the container engine: ")


def test_replacing_directories_through_a_symlink_is_linear(tmp_path: Path) -> None:
    # Each file replaces a directory of the same place under another name: removing a
    # directory once scanned the whole tree, quadratic in the layer's members.
    count = 10_000
    layer = raw_tar([Member(b"d%d" % n, b"5") for n in range(count)]
                    + [Member(b"l", b"2", link=b"/")]
                    + [Member(b"l/d%d" % n, data=b"x") for n in range(count)])
    started = time.monotonic()
    tree = final_tree(jobs(tmp_path, layer))
    assert time.monotonic() - started < 20  # about 0.3 s; quadratic took minutes
    assert len(tree) == count + 1 and tree["/d7"].kind == REGULAR


def test_a_hard_link_to_a_whiteout_is_a_second_whiteout(tmp_path: Path) -> None:
    # Found by issue 37's generator against the engine: overlay's whiteout is a device
    # node, and a hard link to it another one; the model and the scan refused the layer.
    lower = raw_tar([Member(b"h", data=b"lower"), Member(b"k", data=b"kept")])
    upper = raw_tar([Member(b"b/.wh.f"), Member(b"h", b"1", link=b"b/f")])
    layers = jobs(tmp_path, lower, upper)
    assert final_tree(layers) == {"/b": Entry(DIRECTORY, 0o755),
                                  "/k": Entry(REGULAR, 0o644, sha(b"kept"))}
    scans = [scan_layer(job) for job in layers]
    assert not [h for h in scans[1].hazards if h.kind == REFUSED]
    stack = stack_of(scans)
    assert stack.top("/h")[0] is None and stack.top("/k")[0] == 0
