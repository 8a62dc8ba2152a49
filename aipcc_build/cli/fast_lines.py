"""The common command lines of a command read without click (`verify_args`,
`validate_args`): its REFs and its options in any order, `--opt value` and `--opt=value`,
flags, `--tls-verify`, `--no-tls-verify` and `--tls-verify=BOOL`. Anything else is declined,
for the click command to read (or refuse) as it always has."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Callable, Optional

# click's spellings of --tls-verify's value (options.BOOLEAN_WORDS, which imports click).
BOOLEAN_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False,
                 "no": False}
# What a value's conversion returns for a value the click command reads otherwise, or
# refuses.
DECLINED = object()


def read_line(args: list[str], takes_value: Mapping[str, str], flags: Mapping[str, str],
              converted: Callable[[str, str], Any]
              ) -> Optional[tuple[list[str], dict[str, Any]]]:
    """(the REFs, the values by field) of ARGS, the words after the command: TAKES_VALUE and
    FLAGS name each option's field (`tls_verify` is the TLS switch's), CONVERTED(field,
    text) a value's (DECLINED when click must read it). None when the click command must
    read ARGS: another option, an option twice, a value missing or starting with `-`, no
    REF, or a REF that is a boolean word (`--tls-verify yes`, a deprecated spelling)."""
    values: dict[str, Any] = {}
    refs: list[str] = []
    rest = iter(args)
    for arg in rest:
        if not arg.startswith("-") or arg == "":
            refs.append(arg)
            continue
        name, equals, value = arg.partition("=")
        if name in takes_value:
            if not equals:
                following = next(rest, None)
                if following is None or following.startswith("-"):
                    return None  # click's message (or its reading of it) decides
                value = following
            field = takes_value[name]
            value = converted(field, value)
            if field in values or value is DECLINED:
                return None
            values[field] = value
        elif name in ("--tls-verify", "--no-tls-verify"):
            if "tls_verify" in values:
                return None
            if equals:
                if name == "--no-tls-verify" or value.lower() not in BOOLEAN_WORDS:
                    return None
                values["tls_verify"] = BOOLEAN_WORDS[value.lower()]
            else:
                values["tls_verify"] = name == "--tls-verify"
        elif arg in flags and flags[arg] not in values:
            values[flags[arg]] = True
        else:
            return None
    if not refs or any(ref.lower() in BOOLEAN_WORDS for ref in refs):
        return None
    return refs, values
