"""Files the project generates and commits (Containerfiles from `render`, Konflux's
PipelineRuns and tenant manifests from `plan --format konflux`): compared with the disk, written
atomically, or only checked for drift, which CI fails on.

Every generated file starts with a header naming its source: on its first line, or on its
second after a first comment line its format wants there (a script's `#!`, the constraints
file's tag line). A file without it was written by a person and is never replaced; a
symbolic link or anything but a regular file where a file goes, or a directory on the way
that leads out of the tree, is refused before the first write.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .errors import InputError
from .fsutil import write_atomic


@dataclass(frozen=True)
class FileChange:
    path: str
    state: str  # "changed", "missing" (would be created) or "stale" (left the matrix)


@dataclass(frozen=True)
class RenderResult:
    checked: bool  # True for a drift check: nothing was written
    changes: tuple[FileChange, ...]
    unchanged: int


@dataclass(frozen=True)
class GeneratedTree:
    """Where one command writes its generated files, and how it recognises its own."""

    root: Path
    header_prefix: str  # what the header line of each of its files starts with
    writer: str  # the command, for messages: "aipcc-build render"


def current_text(tree: GeneratedTree, path: Path, *, check: bool) -> Optional[str]:
    """The text at PATH (None: no file yet), refusing what the writer must not replace."""
    try:
        depth = len(path.relative_to(tree.root).parts) - 1
    except ValueError:
        depth = 0
    for parent in reversed(list(path.parents)[:depth]):
        if parent.is_symlink() and not _inside(tree.root, parent):
            raise InputError(f"a symbolic link to {os.path.realpath(parent)}, outside "
                             f"{tree.root}: {tree.writer} writes only inside it",
                             file=str(parent))
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise InputError(f"not a regular file where {tree.writer} writes one: move it away",
                         file=str(path))
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise InputError(f"cannot read it: {why}", file=str(path)) from None
    if not check and not has_header(current, tree.header_prefix):
        raise InputError(f"not written by {tree.writer} (it lacks the generated header): "
                         "move it away or delete it, then run it again", file=str(path))
    return current


def sync(tree: GeneratedTree, wanted: Mapping[Path, str], *, check: bool,
         stale: Iterable[Path] = (),
         keep: Callable[[Path, str, str], str] = lambda path, text, current: text,
         removed: Callable[[Path], None] = lambda path: None) -> RenderResult:
    """Bring the files WANTED (path -> text) to the disk, or with CHECK only compare them.
    KEEP(path, wanted text, current text) may keep a part of what is there (a pin a bot
    rewrites); STALE are files of this writer that are no longer wanted, removed (then
    REMOVED is told). Every refusal comes before the first write."""
    currents = {path: current_text(tree, path, check=check) for path in wanted}
    changes: list[FileChange] = []
    unchanged = 0
    for path, text in wanted.items():
        current = currents[path]
        if current is not None:
            text = keep(path, text, current)
        if current == text:
            unchanged += 1
            continue
        changes.append(FileChange(str(path), "missing" if current is None else "changed"))
        if not check:
            write_atomic(path, text)
    for path in stale:
        if path in wanted:
            continue
        changes.append(FileChange(str(path), "stale"))
        if not check:
            path.unlink()
            removed(path)
    return RenderResult(checked=check, changes=tuple(changes), unchanged=unchanged)


def ours(tree: GeneratedTree, paths: Iterable[Path]) -> list[Path]:
    """Those of PATHS that are regular files inside the tree and start with its header:
    the only files the writer may remove."""
    found = []
    for path in paths:
        if path.is_symlink() or not path.is_file() or not _inside(tree.root, path):
            continue
        with open(path, encoding="utf-8", errors="replace") as handle:
            if has_header(handle.read(_HEAD), tree.header_prefix):
                found.append(path)
    return found


_HEAD = 4096  # enough of a file for a first line and the header


def has_header(text: str, prefix: str) -> bool:
    """Whether TEXT carries the header that starts with PREFIX: as its first line, or as its
    second after a first comment line (`#!/bin/sh`, which must come first)."""
    first, _, rest = text.partition("\n")
    return text.startswith(prefix) or (first.startswith("#") and rest.startswith(prefix))


def _inside(root: Path, path: Path) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)
