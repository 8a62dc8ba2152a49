"""Issue 38: `index` to a static tree on a disk that fills while it writes, or that is
read-only, gives every variant a "not switched" result (exit 1), its line, and --json;
what was served before is served still. Real tmpfs mounts (root)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.filesystems import tmpfs
from tests.support.project import REPO
from tests.support.wheels import make_wheel

DEMO = REPO / "matrix" / "demo.yaml"
VARIANTS = ("cuda12.8-debian", "cpu-debian")

pytestmark = pytest.mark.integration


def wheels(tmp_path: Path) -> list[str]:
    """Each variant a wheel of 600 KB that does not compress: the second fills a 1 MB tmpfs."""
    pairs = []
    for variant in VARIANTS:
        directory = tmp_path / "w" / variant
        make_wheel(directory, "demo-app", "1.0", files={"demo_app/blob": os.urandom(600_000)})
        pairs.append(f"{variant}={directory}")
    return pairs


def test_a_disk_that_fills_during_index_leaves_every_variant_not_switched(
        tmp_path: Path, cli) -> None:
    pairs = wheels(tmp_path)
    with tmpfs(tmp_path / "small", "1m") as root:
        for as_json in (("--json",), ()):
            done = cli("--matrix", str(DEMO), "index", *as_json, str(root), *pairs)
            assert done.code == 1, done.err
            assert "Traceback" not in done.err
            for variant in VARIANTS:
                assert f"index: {variant}: not switched" in done.err, done.err
            assert "No space left on device" in done.err
            if as_json:
                document = json.loads(done.out)
                assert document["ok"] is False
                assert [v["switched"] for v in document["variants"]] == [False, False]
                assert all("not switched" in v["error"] for v in document["variants"])
            else:
                assert [line.split("\t")[0] for line in done.out.splitlines()] == \
                    list(VARIANTS)
        # Nothing half-written is left to be served.
        assert not [p for p in root.iterdir() if not p.name.startswith(".")]


def test_a_read_only_destination_is_not_switched_and_says_why(tmp_path: Path, cli) -> None:
    pairs = wheels(tmp_path)
    with tmpfs(tmp_path / "ro", read_only=True) as root:
        done = cli("--matrix", str(DEMO), "index", "--json", str(root), *pairs)
    assert done.code == 1, done.err
    document = json.loads(done.out)
    assert all("Read-only file system" in v["error"] for v in document["variants"])
