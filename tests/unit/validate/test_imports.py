"""A validation loads what it reads and judges with, not the rest of the product: the matrix
model and its expansion (about 60 ms of dataclasses built at import) are the build's, and a
warm `aipcc-build validate` of one image costs little more than the interpreter's start."""

from __future__ import annotations

from tests.support.imports import loaded_by


def test_the_validator_loads_no_matrix_code() -> None:
    loaded = loaded_by("from aipcc_build.validate import validate_targets")
    assert not {m for m in loaded if m.startswith(("aipcc_build.matrix",
                                                   "aipcc_build.render",
                                                   "aipcc_build.plan"))}, sorted(loaded)
