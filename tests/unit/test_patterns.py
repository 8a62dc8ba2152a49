"""patterns.lazy: a regular expression compiled on its first use, then the compiled
pattern's own methods (issue 37: a warm validation compiles only what it matches)."""

from __future__ import annotations

import re

from aipcc_build.patterns import IGNORECASE, lazy


def test_a_lazy_pattern_answers_as_the_compiled_one() -> None:
    text = "cuda-12.8 and rocm-6.4"
    source = r"(cuda|rocm)-(\d+)\.(\d+)"
    compiled = re.compile(source)
    pattern = lazy(source)
    assert pattern.search(text).groups() == compiled.search(text).groups()  # type: ignore[union-attr]
    assert pattern.findall(text) == compiled.findall(text)
    assert pattern.sub("X", text) == compiled.sub("X", text)
    assert pattern.pattern == source and pattern.groups == 3
    assert lazy(rb"[0-7]+").fullmatch(b"0755") is not None
    assert lazy("ab", re.IGNORECASE).match("AB") is not None


def test_nothing_is_compiled_before_the_first_use_and_once_after() -> None:
    pattern = lazy(r"never(?:used)")
    assert "match" not in vars(pattern)  # nothing bound: not compiled
    pattern.match("neverused")
    bound = vars(pattern)["match"]
    assert bound.__self__ is re.compile(r"never(?:used)")  # the compiled pattern's method
    pattern.match("x")
    assert vars(pattern)["match"] is bound


def test_ignorecase_is_res_flag() -> None:
    """patterns.IGNORECASE (given to a lazy pattern without importing re) is re's flag."""
    assert IGNORECASE == re.IGNORECASE
    assert lazy("ab", IGNORECASE).match("AB") is not None
    assert lazy("ab", IGNORECASE).flags == re.compile("ab", re.IGNORECASE).flags
