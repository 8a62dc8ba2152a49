"""Which images changed since a git revision (`plan --changed-since`).

An image's inputs are its matrix entry, its template with every template that one includes
or imports, its rendered Containerfile and its build context. An image whose inputs changed
is selected together with every image built FROM it. A changed file outside every image's
inputs selects nothing. git is asked once for the changed names (and once more for the
matrix file's changed lines), never once per image.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Optional

import yaml

from . import git
from .matrix import Filters, check_filters, expand
from .model import ImageSpec, Matrix
from .plan import build_context

# What a changed part of the matrix file touches: ("all",), ("accelerator", name),
# ("version", accelerator, version), ("os", name) or ("kind", name).
Selector = tuple[str, ...]
EVERY_IMAGE: Selector = ("all",)


def select(matrix: Matrix, *, build_id: str, registry: Optional[str], filters: Filters,
           changed_since: Optional[str]) -> list[ImageSpec]:
    """The images a plan builds: those matching FILTERS and, with CHANGED_SINCE, changed."""
    images = expand(matrix, build_id=build_id, registry=registry)
    check_filters(matrix, images, filters)
    if changed_since is not None:
        # Dependents are found over the whole matrix, before the filters narrow it.
        changed = changed_images(matrix, images, changed_since)
        images = [image for image in images if image.key in changed]
    return [image for image in images if filters.matches(image)]


def changed_images(matrix: Matrix, images: Sequence[ImageSpec], rev: str) -> set[str]:
    """Keys of IMAGES whose inputs differ between REV and the work tree, with dependents."""
    directory = str(Path(matrix.path).resolve().parent)
    top = git.toplevel(directory)
    changed = {str(top / name) for name in git.changed_files(directory, rev)}
    selected: set[str] = set()

    matrix_file = Path(matrix.path).resolve()
    if str(matrix_file) in changed:
        hunks = git.changed_lines(directory, rev, matrix_file.relative_to(top).as_posix())
        selectors = matrix_selectors(matrix_file.read_text(), hunks)
        selected.update(image.key for image in images if _selected(image, selectors))

    by_file: dict[str, set[str]] = {}
    by_directory: dict[str, set[str]] = {}
    template_files = _template_inputs(matrix, {image.template for image in images})
    for image in images:
        for path in template_files[image.template]:
            by_file.setdefault(path, set()).add(image.key)
        by_file.setdefault(image.containerfile, set()).add(image.key)
        by_directory.setdefault(build_context(image), set()).add(image.key)
    for path in changed:
        selected.update(by_file.get(path, ()))
        for parent in Path(path).parents:
            selected.update(by_directory.get(str(parent), ()))
    return _with_dependents(images, selected)


def matrix_selectors(text: str, hunks: Iterable[git.Hunk]) -> set[Selector]:
    """The matrix entries the changed lines fall in (comment-only hunks change nothing)."""
    owner = _line_owners(text)
    found: set[Selector] = set()
    for hunk in hunks:
        if all(not line.strip() or line.lstrip().startswith("#") for line in hunk.text):
            continue
        for line in range(hunk.first, hunk.last + 1):
            selector = owner.get(line)
            if selector is not None:
                found.add(selector)
    return found


def _selected(image: ImageSpec, selectors: set[Selector]) -> bool:
    return bool(selectors & {
        EVERY_IMAGE,
        ("accelerator", image.accelerator),
        ("version", image.accelerator, image.version or ""),
        ("os", image.os),
        ("kind", image.kind),
    })


def _line_owners(text: str) -> dict[int, Selector]:
    """Line (1-based) -> the innermost matrix entry it belongs to; lines of no entry absent."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    owner: dict[int, Selector] = {}
    if not isinstance(root, yaml.MappingNode):
        return owner

    def paint(key: yaml.Node, value: yaml.Node, selector: Selector) -> None:
        for line in range(key.start_mark.line + 1, _last_line(value) + 1):
            owner[line] = selector

    # Outer entries first, inner ones overwrite them.
    for key, value in root.value:
        paint(key, value, EVERY_IMAGE)
        section = {"os": "os", "images": "kind", "accelerators": "accelerator"}.get(key.value)
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
        if key.value != "versions" or not isinstance(value, yaml.SequenceNode):
            continue
        for item in value.value:
            version = _version_of(item)
            if version is None:
                continue
            for line in range(item.start_mark.line + 1, _last_line(item) + 1):
                owner[line] = ("version", accelerator, version)


def _version_of(item: yaml.Node) -> Optional[str]:
    if isinstance(item, yaml.MappingNode):
        for key, value in item.value:
            if key.value == "version" and isinstance(value, yaml.ScalarNode):
                return str(value.value)
    return None


def _last_line(node: yaml.Node) -> int:
    """The last line (1-based) holding NODE's own text.

    A block collection's end mark lies at the next token, possibly on the next entry's
    line, so the last line is found through its last child instead.
    """
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return _last_line(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return _last_line(node.value[-1])
    end = node.end_mark
    # A block scalar ends at column 0 of the line after its text.
    return end.line + 1 if end.column > 0 or end.line == node.start_mark.line else end.line


def _template_inputs(matrix: Matrix, templates: Iterable[str]) -> dict[str, set[str]]:
    """Template name -> absolute paths of it and everything it includes or imports."""
    import jinja2
    from jinja2 import meta

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(matrix.templates))
    root = Path(matrix.templates)
    references: dict[str, Optional[set[str]]] = {}

    def referenced(name: str) -> Optional[set[str]]:
        """Direct references of NAME; None when one is computed at render time."""
        if name not in references:
            try:
                source = env.loader.get_source(env, name)[0]  # type: ignore[union-attr]
            except jinja2.TemplateNotFound:
                references[name] = set()  # render reports the missing file
                return references[name]
            found = set(meta.find_referenced_templates(env.parse(source)))
            references[name] = None if None in found else {str(n) for n in found}
        return references[name]

    result: dict[str, set[str]] = {}
    for template in templates:
        files: set[str] = set()
        pending, seen = [template], set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            files.add(str(root / name))
            names = referenced(name)
            if names is None:
                # A computed include could name any template: all of them are inputs.
                files.update(str(path) for path in root.rglob("*") if path.is_file())
                continue
            pending.extend(names)
        result[template] = files
    return result


def _with_dependents(images: Sequence[ImageSpec], selected: set[str]) -> set[str]:
    children: dict[str, list[str]] = {}
    for image in images:
        if image.depends_on is not None:
            children.setdefault(image.depends_on, []).append(image.key)
    result = set(selected)
    pending = list(selected)
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in result:
                result.add(child)
                pending.append(child)
    return result
