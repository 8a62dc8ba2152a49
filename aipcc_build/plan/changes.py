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

from ..matrix import (
    EVERY_IMAGE,
    Filters,
    ImageSpec,
    Matrix,
    Selector,
    check_filters,
    expand,
    line_owners,
    matching,
)
from ..render import template_inputs
from ..tools.git import Git, Hunk
from ..tools.runner import Runner
from .dag import build_context


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
        hunks = git.changed_lines(rev, matrix_file.relative_to(top).as_posix())
        selectors = matrix_selectors(matrix_file.read_text(), hunks)
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


def matrix_selectors(text: str, hunks: Iterable[Hunk]) -> set[Selector]:
    """The matrix entries the changed lines fall in (comment-only hunks change nothing)."""
    owner = line_owners(text)
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
