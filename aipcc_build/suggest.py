"""The one "did you mean" of every message that refuses a name: a matrix key, an OS, an
image kind, a filter value, a platform, a GPU, a variant."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional


def did_you_mean(word: str, choices: Iterable[str], *, listing: Optional[str] = None,
                 ignore_case: bool = False, cutoff: float = 0.6) -> str:
    """" (did you mean 'X'?)" for the closest of CHOICES; otherwise " (LISTING: a, b)" when
    LISTING names the choices, else "". difflib is imported here, on a refusal only: the
    commands that never refuse a name do not load it."""
    import difflib

    names = list(choices)
    if ignore_case:
        by_key = {name.upper(): name for name in names}
        close = [by_key[key] for key in
                 difflib.get_close_matches(word.upper(), list(by_key), n=1, cutoff=cutoff)]
    else:
        close = difflib.get_close_matches(word, names, n=1, cutoff=cutoff)
    if close:
        return f" (did you mean '{close[0]}'?)"
    if listing is not None:
        return f" ({listing}: {', '.join(names)})"
    return ""
