"""The second read: one path of an image's final filesystem, read from its layer stack as
a process in the container opens it (topmost layer, whiteouts, opaque directories,
symlinks and hard links), walking only the layers it needs."""

from __future__ import annotations

import gzip
import hashlib
import tarfile
from pathlib import Path

import pytest

from aipcc_build.imagefs import lookup
from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
from aipcc_build.imagefs.lookup import read_path, view_layer
from aipcc_build.imagefs.overlay import LayerIndex, Wanted
from tests.support.layers import member, tar_bytes

PATH = "/opt/conf/site-pip.ini"
LIMIT = 1 << 20


def layer(tmp_path: Path, name: str, *members: tuple[tarfile.TarInfo, bytes],
          compress: bool = False) -> LayerJob:
    data = tar_bytes(list(members))
    if compress:
        data = gzip.compress(data)
    blob = tmp_path / name
    blob.write_bytes(data)
    return LayerJob("sha256:" + hashlib.sha256(data).hexdigest(), "", BlobLocation(str(blob)))


def missing_layer(tmp_path: Path) -> LayerJob:
    """A layer whose blob is not there: reading it would be an error."""
    return LayerJob("sha256:" + "0" * 64, "", BlobLocation(str(tmp_path / "gone")))


def test_the_topmost_layer_holding_the_path_wins_and_lower_ones_are_not_read(
        tmp_path: Path) -> None:
    lower = layer(tmp_path, "lower", member(PATH[1:], b"lower"))
    upper = layer(tmp_path, "upper", member("etc/other", b"x"),
                  member("." + PATH, b"upper"), compress=True)
    read = read_path([lower, upper], PATH, LIMIT)
    assert (read.text, read.layer, read.path, read.problem) == ("upper", upper.digest, PATH,
                                                                None)
    assert read_path([missing_layer(tmp_path), upper], PATH, LIMIT).text == "upper"
    assert read_path([lower, layer(tmp_path, "empty")], PATH, LIMIT).layer == lower.digest


def test_whiteouts_and_opaque_directories_above_remove_it(tmp_path: Path) -> None:
    lower = layer(tmp_path, "lower", member(PATH[1:], b"lower"))
    for name, whiteout in (("file", "opt/conf/.wh.site-pip.ini"), ("dir", "opt/.wh.conf"),
                           ("opaque", "opt/conf/.wh..wh..opq")):
        read = read_path([lower, layer(tmp_path, name, member(whiteout))], PATH, LIMIT)
        assert read.absent and read.text is None
        assert read.problem in ("/opt/conf/site-pip.ini is removed by layer 2",
                                "/opt/conf is removed by layer 2",
                                "layer 2 makes /opt/conf opaque")
    # A layer's own members count before its whiteouts, which remove lower content only.
    same = layer(tmp_path, "same", member("opt/conf/.wh..wh..opq"), member(PATH[1:], b"new"))
    assert read_path([lower, same], PATH, LIMIT).text == "new"
    assert read_path([], PATH, LIMIT).problem == "no such file"


def test_symlinks_at_the_path_and_above_it_are_followed_inside_the_image(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = layer(tmp_path, "base", member("opt", kind=tarfile.SYMTYPE, link="srv/opt"),
                 member("srv/opt/conf/real.ini", b"real"))
    link = layer(tmp_path, "link", member("srv/opt/conf/site-pip.ini", kind=tarfile.SYMTYPE,
                                          link="../conf/./real.ini"))
    read = read_path([base, link], PATH, LIMIT)
    assert (read.text, read.path, read.layer) == ("real", "/srv/opt/conf/real.ini",
                                                  base.digest)
    # A relative target that climbs above the root stays at the root.
    escape = layer(tmp_path, "escape", member(PATH[1:], kind=tarfile.SYMTYPE,
                                              link="../../../../srv/opt/conf/real.ini"))
    assert read_path([base, escape], PATH, LIMIT).text == "real"
    loop = layer(tmp_path, "loop", member("a", kind=tarfile.SYMTYPE, link="b"),
                 member("b", kind=tarfile.SYMTYPE, link="a"))
    read = read_path([loop], "/a/pip.ini", LIMIT)
    assert read.absent and "never resolve" in (read.problem or "")
    # Every layer is walked once, however many hops: a second read never rereads the stack.
    walks: list[str] = []

    def counted(job: LayerJob, wanted: str, limit: int) -> tuple[LayerIndex, Wanted]:
        walks.append(job.digest)
        return view_layer(job, wanted, limit)

    monkeypatch.setattr(lookup, "view_layer", counted)
    chain = [layer(tmp_path, f"hop{n}", member(f"l{n}", kind=tarfile.SYMTYPE, link=f"l{n + 1}"))
             for n in range(5)]
    chain.insert(0, layer(tmp_path, "target", member("l5", b"end")))
    assert read_path(chain, "/l0", LIMIT).text == "end"
    assert sorted(walks) == sorted(job.digest for job in chain)


def test_what_is_not_a_readable_file(tmp_path: Path) -> None:
    directory = layer(tmp_path, "dir", member(PATH[1:], kind=tarfile.DIRTYPE))
    assert read_path([directory], PATH, LIMIT).problem == "a directory"
    blocked = layer(tmp_path, "blocked", member("opt/conf", b"a file"))
    assert read_path([blocked], PATH, LIMIT).problem == "/opt/conf is not a directory"
    big = layer(tmp_path, "big", member(PATH[1:], b"x" * 2000))
    read = read_path([big], PATH, 1000)
    assert not read.absent and read.layer == big.digest and read.text is None
    assert read.problem == "2000 bytes, more than 1000: not read"
    hard = layer(tmp_path, "hard", member("opt/conf/shared.ini", b"shared"),
                 member(PATH[1:], kind=tarfile.LNKTYPE, link="opt/conf/shared.ini"))
    read = read_path([hard], PATH, LIMIT)
    assert (read.text, read.path) == ("shared", PATH)


def test_a_layer_that_does_not_match_its_digest_is_an_error(tmp_path: Path) -> None:
    good = layer(tmp_path, "good", member(PATH[1:], b"x"))
    (tmp_path / "good").write_bytes(tar_bytes([member(PATH[1:], b"y")]))
    read = read_path([good], PATH, LIMIT)
    assert read.error is not None and "does not match its digest" in read.error
    assert not read.absent
    missing = read_path([missing_layer(tmp_path)], PATH, LIMIT)
    assert "cannot open layer blob" in (missing.error or "")
