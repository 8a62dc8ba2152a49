"""Every pattern run on text from outside (tool output, build logs, registry and index
answers, wheel metadata, files read from images) takes time linear in that text: each is
fed a line without a newline built from the piece that costs it most (found on a small
line), and must finish within a bound no quadratic pattern meets. Each pattern's line is
1 MB, where a quadratic pattern already takes ten minutes or more (`a+b` searched in 1 MB of
`a`: 640 s; `[\\w.]+@h` in `a.`: 4,500 s) and a linear one a tenth of a second; the bar's
10 MB line is fed once per family (the pattern that costs most per character, the masking
piece that costs most), rather than to each of the 44, which spent 12 of the unit tests'
70 s of CPU. The bound is generous on purpose: this is not a speed test."""

from __future__ import annotations

import re
import time
from functools import cache
from typing import Callable, Union

import pytest

from aipcc_build import errors
from aipcc_build.imagebuild import preflight
from aipcc_build.report import progress
from aipcc_build.tools import buildah, git, retry
from aipcc_build.validate import (
    builds,
    detect,
    distributions,
    index_config,
    libraries,
    packages,
    requirements,
    verdict,
    version_files,
)
from aipcc_build.wheel_indexes import wheel_file

LINE = 10 * 1024 * 1024
SCALED = 1024 * 1024
PROBE = 4 * 1024
BOUND_SECONDS = 30.0

Pattern = Union["re.Pattern[str]", "re.Pattern[bytes]"]
# (name, the pattern, how the product applies it)
APPLIED: list[tuple[str, Pattern, str]] = [
    ("errors._REGISTRY_HOST", errors._REGISTRY_HOST, "search"),
    ("errors._TOOL_MESSAGE", errors._TOOL_MESSAGE, "findall"),
    ("retry.TRANSIENT", retry.TRANSIENT, "search"),
    ("retry._RETRY_AFTER", retry._RETRY_AFTER, "search"),
    ("retry.STORAGE_RACE", retry.STORAGE_RACE, "search"),
    ("retry.RUNTIME_START", retry.RUNTIME_START, "search"),
    ("buildah.RUN_STEP_FAILED", buildah.RUN_STEP_FAILED, "search"),
    ("buildah.UNCONSUMED_ARGS", buildah.UNCONSUMED_ARGS, "match"),
    ("git.HUNK", git.HUNK, "match"),
    ("progress.STEP_LINE", progress.STEP_LINE, "match"),
    ("preflight.CHALLENGE_PARAMETER", preflight.CHALLENGE_PARAMETER, "findall"),
    ("detect.CANDIDATE_BYTES", detect.CANDIDATE_BYTES, "search"),
    ("detect.CANDIDATE", detect.CANDIDATE, "search"),
    ("libraries.LIBRARY", libraries.LIBRARY, "search"),
    ("distributions.DIST_INFO", distributions.DIST_INFO, "match"),
    ("distributions.RECORD", distributions.RECORD, "match"),
    ("distributions.SITE_PACKAGE", distributions.SITE_PACKAGE, "match"),
    ("detect._NVIDIA_WHEEL_TREE", detect._NVIDIA_WHEEL_TREE, "match"),
    ("detect._PRIVATE_TOOL", detect._PRIVATE_TOOL, "search"),
    ("detect._SHARED_OBJECT", detect._SHARED_OBJECT, "search"),
    ("version_files.BUILD_VERSION", version_files.BUILD_VERSION, "findall"),
    ("version_files.TORCH_CUDA", version_files.TORCH_CUDA, "search"),
    ("version_files.CUDA_TXT", version_files.CUDA_TXT, "search"),
    ("distributions._NVIDIA_WHEEL", distributions._NVIDIA_WHEEL, "match"),
    ("distributions.CONDA_META", distributions.CONDA_META, "search"),
    ("builds._ROCM_NAME", builds._ROCM_NAME, "match"),
    ("builds._BACKEND", builds._BACKEND, "search"),
    ("packages._CUDA_PACKAGE", packages._CUDA_PACKAGE, "match"),
    ("packages._ROCM_CODE", packages._ROCM_CODE, "findall"),
    ("packages._DPKG_FIELD", packages._DPKG_FIELD, "findall"),
    ("index_config._VERSIONED", index_config._VERSIONED, "search"),
    ("index_config._UNVERSIONED", index_config._UNVERSIONED, "search"),
    ("verdict._NAME_TOOLKIT", verdict._NAME_TOOLKIT, "search"),
    ("verdict._VERSIONED_VARIANT", verdict._VERSIONED_VARIANT, "search"),
    ("requirements._NAME", requirements._NAME, "match"),
    ("wheel_file._REQUIREMENT", wheel_file._REQUIREMENT, "match"),
    ("wheel_file._PIN", wheel_file._PIN, "match"),
    ("wheel_file._WHEEL_NAME", wheel_file._WHEEL_NAME, "match"),
]
_GENERIC = ["a", "1", ".", "-", "/", ":", "=", " ", "@", '"', "\\", "_", "a:", "=a", "a.",
            "-a", "a/", "1.", "a@", "--", ":1", "://a", "/a", "a-1", "(a", "a,"]
# What may follow the repeated piece: nothing, a character no pattern expects, the end.
_ENDS = ("", "!", "@h")


def _pieces(source: str) -> list[str]:
    """The generic pieces and, for each word of the pattern, the word with each separator:
    what makes a pattern start, and fail, again and again."""
    words = set(re.findall(r"[A-Za-z_]{2,}", source))
    return _GENERIC + [word + sep for word in sorted(words)
                       for sep in ("", " ", "=", ":", "/", ".", "-", "1")]


def _timed(apply: Callable[[str], object], text: str) -> float:
    start = time.perf_counter()
    apply(text)
    return time.perf_counter() - start


def _line_of(piece: str, end: str, size: int) -> str:
    return piece * (size // len(piece)) + end


def _worst(apply: Callable[[str], object], pieces: list[str]) -> tuple[str, str]:
    """The piece and end that cost APPLY most on a small line."""
    costs = {(piece, end): _timed(apply, _line_of(piece, end, PROBE))
             for piece in pieces for end in _ENDS}
    return max(costs, key=lambda key: costs[key])


def _applied(pattern: Pattern, how: str) -> Callable[[str], object]:
    method = getattr(pattern, how)
    if isinstance(pattern.pattern, bytes):
        return lambda text: method(text.encode())
    return method  # type: ignore[no-any-return]


@cache
def _worst_line(name: str) -> tuple[Callable[[str], object], str, str, float]:
    """NAME's pattern as the product applies it, the piece and end that cost it most, and
    their cost per character on the small line (probed once a session)."""
    pattern, how = next((pattern, how) for entry, pattern, how in APPLIED if entry == name)
    source = pattern.pattern.decode() if isinstance(pattern.pattern, bytes) else pattern.pattern
    apply = _applied(pattern, how)
    piece, end = _worst(apply, _pieces(source))
    return apply, piece, end, _timed(apply, _line_of(piece, end, PROBE)) / PROBE


def _within_bound(name: str, apply: Callable[[str], object], piece: str, end: str,
                  size: int) -> None:
    seconds = _timed(apply, _line_of(piece, end, size))
    assert seconds < BOUND_SECONDS, f"{name} on {piece!r} * {size // len(piece)}: {seconds:.1f} s"


@pytest.mark.parametrize("name", [entry[0] for entry in APPLIED])
def test_a_pattern_on_outside_text_is_linear(name: str) -> None:
    apply, piece, end, _ = _worst_line(name)
    _within_bound(name, apply, piece, end, SCALED)


def test_the_costliest_pattern_on_a_10_mb_line_is_linear() -> None:
    name = max((entry[0] for entry in APPLIED), key=lambda name: _worst_line(name)[3])
    apply, piece, end, _ = _worst_line(name)
    _within_bound(name, apply, piece, end, LINE)


MASKED_PIECES = [
    ("a", "@h"),          # a scheme's letters: the URL pattern read them from every start
    ("=a", "a:b@h"),      # a user start after every `=`: the reference pattern's
    ("a", "://"),
    ("(a,", ":p@h"),      # the costliest of them: fed the 10 MB line below
    ("--creds ", "x"),
    ("authorization: ", "x"),
]


@pytest.mark.parametrize("piece, end", MASKED_PIECES)
def test_masking_a_long_line_is_linear(piece: str, end: str) -> None:
    _within_bound("without_credentials", errors.without_credentials, piece, end, SCALED)


def test_masking_a_10_mb_line_is_linear() -> None:
    _within_bound("without_credentials", errors.without_credentials, "(a,", ":p@h", LINE)


def test_a_16_kb_word_is_masked_at_once() -> None:
    """The case that was reported: 16 KB of letters took 2.4 s (quadratic)."""
    start = time.perf_counter()
    for _ in range(100):
        errors.without_credentials("a" * 16 * 1024)
    assert time.perf_counter() - start < BOUND_SECONDS


@pytest.mark.parametrize("text, shown", [
    ("--url=me:pw@host", "***@host"),
    ("x --url me:pw@host/ns", "x --url ***@host/ns"),
    ("(a,me:pw@h", "***@h"),
    ("a/me:pw@h", "a/me:pw@h"),           # a path's word: no user starts there
    ("'me:pw@h'", "'***@h'"),
    ("set x=me:pw@h", "set ***@h"),       # the user may hold a `=`: all of it masked
    ("x base:1@sha256:abc", "x base:1@sha256:abc"),
    ("1://tok@h", "1://***@h"),
    ("a:@h b::c@h", "a:@h ***@h"),        # an empty password is no credential
])
def test_a_reference_user_is_masked_where_it_starts(text: str, shown: str) -> None:
    assert errors.without_credentials(text) == shown
