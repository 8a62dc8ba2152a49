"""Issue 37: each class of the final-tree model (tests/support/overlay_cases.py) against the
real engine: the stack copied by skopeo into containers-storage and mounted with buildah
shows (or hides) the other release where the case says, and the validator judges the image
alike from its OCI layout and from containers-storage."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from aipcc_build.validate.pipeline import validate_image
from aipcc_build.validate.results import Expectation
from tests.support.engine import Refused, image_tree, layout, stored
from tests.support.overlay_cases import CASES, Case

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("buildah"),
                       reason="unpacks into the root containers-storage with buildah"),
]

CUDA_12_8 = Expectation("cuda", "12.8")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_class_is_judged_as_the_engine_unpacks_it(tmp_path: Path, case: Case) -> None:
    oci = layout(tmp_path / "oci", list(case.layers))
    [from_layout] = validate_image(oci, expect=CUDA_12_8, cache_dir=tmp_path / "cache-oci")
    with stored(list(case.layers), tmp_path) as image:
        assert not isinstance(image, Refused), image
        tree = image_tree(image)
        [from_storage] = validate_image(f"containers-storage:{image}", expect=CUDA_12_8,
                                        cache_dir=tmp_path / "cache-storage")
    if case.shows:
        assert tree[case.shows].kind in ("0", "2")
    if case.hidden:
        assert case.hidden not in tree or tree[case.hidden].kind == "5"
    assert from_layout.ok == from_storage.ok == case.ok, [
        f.line() for f in (*from_layout.findings, *from_storage.findings)
        if f.status == "violation"]
