"""YAML read with positions: every error names the file, line, column and field.

PyYAML's node tree keeps where each node was written (the plain objects `yaml.safe_load`
returns do not), so readers of hand-written files walk nodes through a `Reader`. A library
under the stages: the matrix loader reads with it, and so can any other file format.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Optional

import yaml

from .errors import InputError
from .suggest import did_you_mean


def compose(text: str, file: str) -> Optional[yaml.Node]:
    """TEXT's node tree (None for an empty document); a syntax error is an InputError at
    its position."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise InputError(f"YAML syntax error: {exc.problem or exc.context}", file=file,
                         line=mark.line + 1 if mark else None,
                         column=mark.column + 1 if mark else None) from None
    except yaml.reader.ReaderError as exc:
        raise InputError(f"YAML syntax error: character {exc.character!r} is not allowed",
                         file=file, line=text.count("\n", 0, exc.position) + 1) from None
    except yaml.YAMLError as exc:
        raise InputError(f"YAML syntax error: {exc}", file=file) from None


class Reader:
    """Walks YAML nodes of one file, raising InputError that point at the node."""

    def __init__(self, path: str) -> None:
        self.path = path

    def error(self, node: Optional[yaml.Node], field: str, message: str) -> InputError:
        if node is None:
            return InputError(message, file=self.path, field=field)
        mark = node.start_mark
        return InputError(message, file=self.path, line=mark.line + 1,
                          column=mark.column + 1, field=field)

    def mapping(self, node: yaml.Node, field: str, allowed: Sequence[str],
                required: Sequence[str] = ()) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """Key -> (key node, value node); rejects unknown and duplicate keys."""
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, field, "expected a mapping")
        found: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            sub = f"{field}.{key}" if field else key
            if allowed and key not in allowed:
                extra = did_you_mean(key, allowed, listing="expected one of")
                raise self.error(key_node, sub, f"unknown key '{key}'{extra}")
            if key in found:
                raise self.error(key_node, sub, f"duplicate key '{key}'")
            found[key] = (key_node, value_node)
        for key in required:
            if key not in found:
                raise self.error(node, f"{field}.{key}" if field else key,
                                 f"required key '{key}' is missing")
        return found

    def entries(self, node: yaml.Node, field: str) -> list[tuple[str, yaml.Node, yaml.Node]]:
        """A mapping whose keys are names chosen by the user (os, accelerators, kinds)."""
        return [(key, k, v) for key, (k, v) in self.mapping(node, field, allowed=()).items()]

    def sequence(self, node: yaml.Node, field: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, field, "expected a list")
        return list(node.value)

    def scalar(self, node: yaml.Node, field: str,
               pattern: Optional[re.Pattern[str]] = None, what: str = "") -> str:
        # The raw text, not the resolved value: `12.10` must not become the float 12.1.
        if not isinstance(node, yaml.ScalarNode) or node.value == "" and node.tag.endswith("null"):
            raise self.error(node, field, "expected a single value")
        text = str(node.value)
        if pattern is not None and not pattern.fullmatch(text):
            raise self.error(node, field, f"'{shown(text)}' is not {what}")
        return text

    def date(self, node: yaml.Node, field: str) -> dt.date:
        text = self.scalar(node, field)
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            raise self.error(node, field, f"'{text}' is not a date (YYYY-MM-DD)") from None

    def plain(self, node: yaml.Node, field: str) -> object:
        try:
            return yaml.SafeLoader("").construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            mark = exc.problem_mark or exc.context_mark
            raise InputError(str(exc.problem or exc.context), file=self.path, field=field,
                             line=mark.line + 1 if mark else None,
                             column=mark.column + 1 if mark else None) from None


def shown(text: str) -> str:
    """TEXT for a one-line message: control characters (a newline) escaped."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def last_line(node: yaml.Node) -> int:
    """The last line (1-based) holding NODE's own text.

    A block collection's end mark lies at the next token, possibly on the next entry's
    line, so the last line is found through its last child instead.
    """
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return last_line(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return last_line(node.value[-1])
    end = node.end_mark
    # A block scalar ends at column 0 of the line after its text.
    return end.line + 1 if end.column > 0 or end.line == node.start_mark.line else end.line
