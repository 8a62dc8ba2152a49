"""Regular expressions compiled on their first use, not at import.

A module-level `re.compile` costs a start of the CLI its compilation whether or not the
run ever matches it: the validator's modules hold dozens, and a warm `aipcc-build validate`
(issue 37) uses a few. `lazy(PATTERN)` stands for `re.compile(PATTERN)`: the first
`match`, `search`, ... compiles it and binds the compiled pattern's methods to the object,
so every later call is the compiled pattern's own, at its speed. `re` itself is imported
then too: with the `enum` it loads, its import is a tenth of a `verify` of one image, which
compiles no pattern.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    import re
    from typing import Any, AnyStr

# re.IGNORECASE's value, for a lazy pattern's flags given without importing `re`.
IGNORECASE = 2

_METHODS = ("match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer")


class _Lazy:
    def __init__(self, pattern: Any, flags: int) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        # Only an attribute the object lacks comes here: the first use of each method.
        import re

        compiled = re.compile(*self._source)
        for method in _METHODS:
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._source[0]!r})"


def lazy(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """PATTERN compiled with FLAGS on its first use."""
    return _Lazy(pattern, flags)  # type: ignore[return-value]  # its stand-in
