"""The one reader of GPU architectures: the spellings the matrix, `compat`, `select` and the
validator accept alike, and their order."""

from __future__ import annotations

import pytest

from aipcc_build.toolkit.gpu_archs import (
    BadArch,
    code_runs_on,
    declared_arch,
    expected_gpus,
    parse_arch,
    sort_archs,
)


@pytest.mark.parametrize(("text", "spelled"), [
    ("sm_90", "sm_90"), ("SM_90A", "sm_90a"), ("sm_100f", "sm_100f"), ("sm_121", "sm_121"),
    ("9.0", "sm_90"), ("10.0a", "sm_100a"), ("90", "sm_90"), ("120", "sm_120"),
    ("compute_90", "sm_90"), ("compute_100f", "sm_100f"), ("gfx90a", "gfx90a"),
    ("gfx942", "gfx942"), ("gfx1100", "gfx1100"), ("gfx90a:xnack-", "gfx90a:xnack-"),
    ("gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-"), (" gfx1201 ", "gfx1201"),
])
def test_a_declared_arch_in_each_spelling(text: str, spelled: str) -> None:
    assert declared_arch(text) == spelled


@pytest.mark.parametrize("text", [
    "", "sm_", "sm_8", "sm_8O", "sm_1000", "sm_090", "sm_90b", "sm_9.0", "sm80", "9", "9.",
    "9.10", "compute90", "gfx", "gfx94", "gfx9420", "gfx0942", "gfx94g", "gfxfoo",
    "gfx90a:xnak-", "gfx90a:xnack", "gfx90a:xnack-:xnack+", "gfx13-generic", "hopper",
    "sm_90\n", "gfx942 gfx90a",
])
def test_a_misspelled_arch_is_refused_naming_it(text: str) -> None:
    with pytest.raises(BadArch, match="not a GPU architecture"):
        declared_arch(text)


def test_a_10_mb_misspelled_arch_is_named_in_one_short_line() -> None:
    with pytest.raises(BadArch) as refused:
        declared_arch("sm_" + "9" * (10 << 20))
    assert len(str(refused.value)) < 300 and "(10485763 characters)" in str(refused.value)


def test_a_generic_target_is_code_not_a_gpu() -> None:
    assert parse_arch("gfx11-generic").generic and parse_arch("gfx9-4-generic").minor == 4
    with pytest.raises(BadArch, match=r"not a GPU: name them \(gfx1100, gfx1101"):
        declared_arch("gfx11-generic")


def test_expected_gpus_drop_the_code_suffix_and_repeats() -> None:
    assert expected_gpus(["9.0", "sm_90a", "sm_100f", "gfx90a:xnack-", "80"]) == (
        "sm_90", "sm_100", "gfx90a:xnack-", "sm_80")


def test_architectures_sort_by_family_and_number() -> None:
    assert sort_archs(["compute_90", "sm_75", "gfx1100", "sm_100", "sm_90a", "sm_90",
                       "gfx90a:xnack-", "gfx942", "gfx11-generic", "compute_120", "sm_86",
                       "gfx908", "what?"]) == (
        "sm_75", "sm_86", "sm_90", "sm_90a", "compute_90", "sm_100", "compute_120",
        "gfx908", "gfx90a:xnack-", "gfx942", "gfx11-generic", "gfx1100", "what?")


def test_declared_sass_runs_by_the_drivers_rules() -> None:
    assert code_runs_on("sm_80", "sm_86") and not code_runs_on("sm_86", "sm_80")
    assert code_runs_on("sm_90a", "sm_90") and not code_runs_on("sm_90a", "sm_100")
    assert code_runs_on("sm_100f", "sm_103") and not code_runs_on("sm_100f", "sm_120")
    assert code_runs_on("compute_80", "sm_120") and not code_runs_on("gfx942", "sm_90")
    assert code_runs_on("gfx90a", "gfx90a:xnack-") and not code_runs_on("sm_90", "gfx942")
