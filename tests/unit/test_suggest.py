"""The one "did you mean" every refusal of a name uses."""

from __future__ import annotations

from aipcc_build.suggest import did_you_mean


def test_the_closest_name_is_suggested() -> None:
    assert did_you_mean("ubi8", ["ubi9", "el9.6"]) == " (did you mean 'ubi9'?)"


def test_without_a_close_name_the_listing_names_every_choice() -> None:
    assert did_you_mean("zzz", ["a", "b"], listing="known") == " (known: a, b)"
    assert did_you_mean("zzz", ["a", "b"]) == ""


def test_case_is_ignored_where_asked_and_the_choice_is_given_as_spelled() -> None:
    assert did_you_mean("h1000", ["H100", "A100"], ignore_case=True, cutoff=0.4) == \
        " (did you mean 'H100'?)"
