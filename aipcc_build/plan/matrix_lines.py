"""Which matrix entry each line of the matrix file belongs to: how `plan --changed-since`
turns the matrix file's changed lines into the images they touch."""

from __future__ import annotations

from typing import Optional

import yaml

from ..matrix import shape
from ..positioned_yaml import last_line

# What a changed part of the matrix file touches: ("all",), ("accelerator", name),
# ("version", accelerator, version), ("os", name) or ("kind", name).
Selector = tuple[str, ...]
EVERY_IMAGE: Selector = ("all",)


def line_owners(text: str) -> dict[int, Selector]:
    """Line (1-based) -> the innermost matrix entry it belongs to; lines of no entry absent."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    owner: dict[int, Selector] = {}
    if not isinstance(root, yaml.MappingNode):
        return owner

    def paint(key: yaml.Node, value: yaml.Node, selector: Selector) -> None:
        for line in range(key.start_mark.line + 1, last_line(value) + 1):
            owner[line] = selector

    # Outer entries first, inner ones overwrite them.
    for key, value in root.value:
        paint(key, value, EVERY_IMAGE)
        section = {shape.OS: "os", shape.IMAGES: "kind",
                   shape.ACCELERATORS: "accelerator"}.get(key.value)
        if section is None or not isinstance(value, yaml.MappingNode):
            continue
        for entry_key, entry in value.value:
            paint(entry_key, entry, (section, str(entry_key.value)))
            if section == "accelerator":
                _paint_versions(str(entry_key.value), entry, owner)
    return owner


def _paint_versions(accelerator: str, entry: yaml.Node, owner: dict[int, Selector]) -> None:
    if not isinstance(entry, yaml.MappingNode):
        return
    for key, value in entry.value:
        if key.value != shape.VERSIONS or not isinstance(value, yaml.SequenceNode):
            continue
        for item in value.value:
            version = _version_of(item)
            if version is None:
                continue
            for line in range(item.start_mark.line + 1, last_line(item) + 1):
                owner[line] = ("version", accelerator, version)


def _version_of(item: yaml.Node) -> Optional[str]:
    if isinstance(item, yaml.MappingNode):
        for key, value in item.value:
            if key.value == shape.VERSION and isinstance(value, yaml.ScalarNode):
                return str(value.value)
    return None
