"""Issue 37: the verdict judges the final tree the engine builds. Each crafted class
(tests/support/overlay_cases.py) was a false pass or a false failure before the judge
asked the one overlay model; here each is judged from an OCI layout (the same stacks go
through the real engine and containers-storage in
tests/integration/test_final_tree_engine.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
from aipcc_build.imagefs.overlay import Stack
from aipcc_build.imagefs.tree import final_tree
from aipcc_build.validate.pipeline import validate_image
from aipcc_build.validate.results import Expectation
from tests.support.engine import layout
from tests.support.overlay_cases import CASES, Case

CUDA_12_8 = Expectation("cuda", "12.8")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_class_is_judged_on_the_final_tree(tmp_path: Path, case: Case) -> None:
    ref = layout(tmp_path / "oci", list(case.layers))
    [verdict] = validate_image(ref, expect=CUDA_12_8, cache_dir=tmp_path / "cache")
    failing = [f.line() for f in verdict.findings if f.status == "violation"]
    assert verdict.ok == case.ok, failing
    # The model's own tree agrees with the premise.
    blobs = tmp_path / "oci" / "blobs" / "sha256"
    tree = final_tree([LayerJob(f"sha256:{digest}", "", BlobLocation(str(blobs / digest)))
                       for digest in (hashlib.sha256(data).hexdigest() for data in case.layers)])
    if case.shows:
        assert case.shows in tree
    if case.hidden:
        assert case.hidden not in tree or tree[case.hidden].kind == "5"
    # A second, cached validation judges the same.
    [again] = validate_image(ref, expect=CUDA_12_8, cache_dir=tmp_path / "cache")
    assert again.ok == case.ok and again.cached_layers == len(case.layers)


def test_the_stack_answers_as_overlayfs() -> None:
    from aipcc_build.imagefs.overlay import LayerIndex

    lower = LayerIndex(kinds={"/a": "5", "/a/f": "0", "/l": "2", "/d": "5", "/d/x": "0"},
                       links={"/l": "/a"})
    upper = LayerIndex(kinds={"/a": "5", "/l": "5", "/d": "0"}, opaque={"/a"})
    stack = Stack.of([lower, upper])
    assert stack.holders("/a").layers == (1,)  # opaque: the lower /a does not merge
    assert stack.hider(0, "/a/f") == 1 and stack.hider(0, "/d/x") == 1
    assert stack.top("/l")[1] == "5" and stack.hider(0, "/l") == 1  # a directory over a link
    assert stack.resolve("/d/x").problem == "/d is not a directory"
    assert Stack.of([lower]).resolve("/l/f").path == "/a/f"


def test_only_files_behind_links_are_read_again() -> None:
    from aipcc_build.validate.results import Evidence, LayerScan
    from aipcc_build.validate.scan_stack import read_through_links, stack_of

    # The usual toolkit link: the scan read the version file where it leads, nothing else.
    usual = LayerScan("sha256:a", 3, evidence=(
        Evidence("cuda-tree", "/usr/local/cuda-12.8", "cuda", "toolkit", "12.8", "12.8"),),
        content_paths=("/usr/local/cuda-12.8/version.json",),
        members=(("/usr/local/cuda", "2", "cuda-12.8"),))
    assert read_through_links({}, [usual], stack_of([usual])) == []
    # dpkg's status as a hard link, pip's config as a symlink: read through them.
    linked = LayerScan("sha256:b", 3, content_paths=("/var/lib/dpkg/status", "/etc/pip.conf"),
                       members=(("/var/lib/dpkg/status", "1", "/opt/blob"),
                                ("/etc/pip.conf", "2", "/opt/conf/pip"),
                                ("/opt/blob", "0", "")))
    assert read_through_links({}, [usual, linked], stack_of([usual, linked])) == [
        "/etc/pip.conf", "/var/lib/dpkg/status"]
