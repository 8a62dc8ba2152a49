"""Which images changed since a git revision (`plan --changed-since`).

An image's inputs are its matrix entry, its template with every template that one includes
or imports, its rendered Containerfile and its build context. An image whose inputs changed
is selected together with every image built FROM it. A changed file outside every image's
inputs selects nothing. git is asked once for the changed names (and, when the matrix file
changed, once for its changed lines and once for its text at the revision), never once per
image.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Optional

import yaml

from ..matrix import Filters, ImageSpec, Matrix, check_filters, expand, matching
from ..render import template_inputs
from ..tools.git import Git, Hunk
from ..tools.runner import Runner
from .dag import build_context
from .matrix_lines import EVERY_IMAGE, Selector, line_owners


def select(matrix: Matrix, *, build_id: str, registry: Optional[str], filters: Filters,
           changed_since: Optional[str], runner: Runner) -> list[ImageSpec]:
    """The images a plan builds: those matching FILTERS and, with CHANGED_SINCE, changed."""
    images = expand(matrix, build_id=build_id, registry=registry)
    check_filters(matrix, images, filters)
    if changed_since is not None:
        # Dependents are found over the whole matrix, before the filters narrow it.
        changed = changed_images(matrix, images, changed_since, runner)
        images = [image for image in images if image.key in changed]
    return matching(images, filters)


def changed_images(matrix: Matrix, images: Sequence[ImageSpec], rev: str,
                   runner: Runner) -> set[str]:
    """Keys of IMAGES whose inputs differ between REV and the work tree, with dependents."""
    git = Git(runner, str(Path(matrix.path).resolve().parent))
    top = git.toplevel()
    rev = git.commit(rev)
    changed = {str(top / name) for name in git.changed_files(rev)}
    selected: set[str] = set()

    matrix_file = Path(matrix.path).resolve()
    if str(matrix_file) in changed:
        relative = matrix_file.relative_to(top).as_posix()
        hunks = git.changed_lines(rev, relative)
        selectors = matrix_selectors(git.file_at(rev, relative), matrix_file.read_text(),
                                     hunks)
        selected.update(image.key for image in images if _selected(image, selectors))

    by_file: dict[str, set[str]] = {}
    by_directory: dict[str, set[str]] = {}
    template_files = template_inputs(matrix, {image.template for image in images})
    for image in images:
        for path in template_files[image.template]:
            by_file.setdefault(path, set()).add(image.key)
        for containerfile in image.containerfiles.values():
            by_file.setdefault(containerfile, set()).add(image.key)
        by_directory.setdefault(build_context(image), set()).add(image.key)
    for path in changed:
        selected.update(by_file.get(path, ()))
        for parent in Path(path).parents:
            selected.update(by_directory.get(str(parent), ()))
    return _with_dependents(images, selected)


def matrix_selectors(before: str, after: str, hunks: Iterable[Hunk]) -> set[Selector]:
    """The matrix entries the changed lines fall in: a removed line in the entry that held
    it in BEFORE (the revision's file), an added line in AFTER's (the work tree's). Comment
    and blank lines change nothing. An entry that is gone (a removed version) selects no
    image: none is left to build."""
    old_owner, new_owner = _owners(before), _owners(after)
    found: set[Selector] = set()
    for hunk in hunks:
        for owner, lines in ((old_owner, hunk.removed), (new_owner, hunk.added)):
            for number, text in lines:
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
                selector = owner.get(number)
                if selector is not None:
                    found.add(selector)
    old_versions, new_versions = _version_entries(before), _version_entries(after)
    return {selector for selector in found
            if selector[0] != "version" or selector not in old_versions
            or selector not in new_versions
            or old_versions[selector] != new_versions[selector]}


# Fields of a version entry that no build reads (the templates, buildah and the validator
# never see them: they say when the images expire and what they need from a node). A
# change to them alone rebuilds nothing: `retire --eol` selects no image.
NOT_BUILT_FROM = frozenset({"eol", "native_driver", "min_driver", "gpu_archs"})


def _version_entries(text: str) -> dict[Selector, object]:
    """Each version entry of TEXT, as read, without the fields no build reads."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    entries: dict[Selector, object] = {}
    accelerators = _child(root, "accelerators")
    for accelerator_key, accelerator in getattr(accelerators, "value", ()):
        for item in getattr(_child(accelerator, "versions"), "value", ()):
            if not isinstance(item, yaml.MappingNode):
                continue
            fields = {str(key.value): _plain(value) for key, value in item.value}
            version = fields.get("version")
            if isinstance(version, str):
                entries[("version", str(accelerator_key.value), version)] = {
                    name: value for name, value in fields.items()
                    if name not in NOT_BUILT_FROM}
    return entries


def _child(node: object, name: str) -> object:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == name:
                return value
    return None


def _plain(node: yaml.Node) -> object:
    """NODE with every scalar as written (12.10 stays "12.10")."""
    if isinstance(node, yaml.MappingNode):
        return tuple((str(key.value), _plain(value)) for key, value in node.value)
    if isinstance(node, yaml.SequenceNode):
        return tuple(_plain(item) for item in node.value)
    return str(node.value)


def _owners(text: str) -> dict[int, Selector]:
    try:
        return line_owners(text)
    except yaml.YAMLError:  # the revision's file did not parse: its lines select everything
        return {number: EVERY_IMAGE for number in range(1, text.count("\n") + 2)}


def _selected(image: ImageSpec, selectors: set[Selector]) -> bool:
    return bool(selectors & {
        EVERY_IMAGE,
        ("accelerator", image.accelerator),
        ("version", image.accelerator, image.version or ""),
        ("os", image.os),
        ("kind", image.kind),
    })


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
