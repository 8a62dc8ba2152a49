"""Edit the matrix file in place: add a toolkit version, mark one end-of-life, remove one.

ruamel.yaml's round trip keeps comments and key order, but it re-spaces some text it parsed
(`ubi9:  {from: ...}` comes back as `ubi9: {from: ...}`). So the edit is made on ruamel's
text and then carried over to the original text line by line: every line the edit did not
touch stays byte-identical. The edited text is validated (`matrix.parse`); nothing is
written here: the render stage renders the edited matrix in memory, then replaces the file
atomically, so the file on disk is never left invalid or half-written.
"""

from __future__ import annotations

import datetime as dt
import difflib
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError
from ..suggest import did_you_mean
from . import shape
from .expand import expand, version_matches
from .loader import DRIVER, ONE_LINE, canonical_version, load, parse, several_lines, shown
from .model import Accelerator, ImageSpec, Matrix, ToolkitVersion

# add-version takes full releases only: "12.9" would not say which patch the images pin.
FULL_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")


@dataclass(frozen=True)
class NewVersion:
    accelerator: str
    version: str
    native_driver: Optional[str] = None
    eol: Optional[dt.date] = None
    vars: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Retirement:
    accelerator: str
    version: str
    eol: Optional[dt.date]  # None only with remove
    remove: bool = False


@dataclass(frozen=True)
class MatrixEdit:
    """An edited matrix, validated, not yet written."""

    path: str
    text: str  # the whole edited file
    matrix: Matrix  # TEXT, parsed
    accelerator: str
    version: str
    what: str  # "adding cuda 13.0.1", for messages
    # add-version: the images the version adds (a patch bump: the images it rebuilds);
    # retire: the version's images (gone from the matrix when removed)
    images: tuple[ImageSpec, ...]
    replaced: Optional[str] = None  # a patch bump: the version it replaced (12.8.1)


def add_version(path: str, new: NewVersion) -> MatrixEdit:
    """The matrix with NEW added to its accelerator's versions."""
    current = load(path)
    accelerator = _accelerator(current, new.accelerator)
    what = f"adding {new.accelerator} {new.version}"
    if not FULL_VERSION.fullmatch(new.version):
        raise InputError(f"'{shown(new.version)}' is not a version of the form X.Y.Z",
                         field="VERSION")
    if canonical_version(new.version) != new.version:
        raise InputError(f"'{new.version}' has leading zeros: write "
                         f"{canonical_version(new.version)}", field="VERSION")
    if new.native_driver is not None and not DRIVER.match(new.native_driver):
        raise InputError(f"'{new.native_driver}' is not a driver version (like 570.124.06)",
                         field="native_driver")
    for name, value in new.vars.items():
        if not name.isidentifier():
            raise InputError(f"'{shown(name)}' is not a template variable name (an "
                             "identifier)", field="vars")
        if several_lines(value):
            raise InputError(f"{name}: {ONE_LINE} ('{shown(value)}')", field="vars")
    if not accelerator.versions:
        raise InputError(f"accelerator '{accelerator.name}' is declared without versions, so "
                         f"its images carry no version ({accelerator.name}-<os>); give it a "
                         f"versions list by hand if it should have some", file=current.path,
                         field=f"accelerators.{accelerator.name}")
    major_minor = ".".join(new.version.split(".")[:2])
    replaced: Optional[ToolkitVersion] = None
    for existing in accelerator.versions:
        if existing.version == new.version:
            raise _at(existing, f"{accelerator.name} {new.version} is already in the matrix")
        if existing.major_minor == major_minor:
            if _parts(new.version) < existing.parts:
                raise _at(existing, f"{accelerator.name} {existing.version} already makes the "
                          f"images {accelerator.name}-{major_minor}-<os> (names carry "
                          f"major.minor only), and {new.version} is older")
            replaced = existing

    original = Path(path).read_text()
    document = _RoundTrip(original)
    versions = document.data[shape.ACCELERATORS][accelerator.name][shape.VERSIONS]
    before = {image.key for image in expand(current)}
    if replaced is not None:
        # A patch release of a version the matrix has (12.8.1 -> 12.8.2): the same images,
        # the entry's version bumped in place. Its vars pinned the old patch's packages:
        # they give way to those given (the component table fills in the rest).
        what = f"bumping {new.accelerator} {replaced.version} to {new.version}"
        _bump(versions[accelerator.versions.index(replaced)], new)
        text = document.carried_over()
        edited = _validated(path, text, what)
        return MatrixEdit(path=path, text=text, matrix=edited, accelerator=accelerator.name,
                          version=new.version, what=what,
                          images=tuple(image for image in expand(edited)
                                       if image.accelerator == accelerator.name
                                       and image.version == new.version),
                          replaced=replaced.version)
    versions.insert(_insertion_index(accelerator.versions, new.version),
                    _version_entry(new, flow=_is_flow(versions[0])))
    text = document.carried_over()
    edited = _validated(path, text, what)
    return MatrixEdit(path=path, text=text, matrix=edited, accelerator=accelerator.name,
                      version=new.version, what=what,
                      images=tuple(image for image in expand(edited)
                                   if image.key not in before))


def retire(path: str, retirement: Retirement) -> MatrixEdit:
    """The matrix with the version's `eol` set, or without the version."""
    current = load(path)
    accelerator = _accelerator(current, retirement.accelerator)
    known = [v.version for v in accelerator.versions]
    # A prefix names a version as the filters' --version does: 12.8 is 12.8.1.
    named = [v for v in known if v == retirement.version] or \
        [v for v in known if version_matches(v, retirement.version)]
    if not named:
        raise InputError(f"{accelerator.name} has no version {retirement.version} "
                         f"(versions: {', '.join(known) or 'none'})", file=current.path,
                         field="VERSION")
    if len(named) > 1:
        raise InputError(f"{retirement.version} names {' and '.join(named)} of "
                         f"{accelerator.name}: give one of them", file=current.path,
                         field="VERSION")
    version = named[0]
    index = known.index(version)
    if retirement.remove and len(known) == 1:
        raise _at(accelerator.versions[0],
                  f"{version} is the last version of {accelerator.name}: without "
                  f"versions its images would be renamed {accelerator.name}-<os>; remove the "
                  f"accelerator by hand instead")
    what = f"retiring {accelerator.name} {version}"
    images = tuple(image for image in expand(current)
                   if image.accelerator == accelerator.name
                   and image.version == version)

    original = Path(path).read_text()
    document = _RoundTrip(original)
    versions = document.data[shape.ACCELERATORS][accelerator.name][shape.VERSIONS]
    if retirement.remove:
        del versions[index]
    else:
        versions[index]["eol"] = retirement.eol
    text = document.carried_over()
    return MatrixEdit(path=path, text=text, matrix=_validated(path, text, what),
                      accelerator=accelerator.name, version=version, what=what,
                      images=images)


def _accelerator(matrix: Matrix, name: str) -> Accelerator:
    if name not in matrix.accelerators:
        extra = did_you_mean(name, matrix.accelerators, listing="accelerators")
        raise InputError(f"unknown accelerator '{name}'{extra}", file=matrix.path,
                         field="ACCELERATOR")
    return matrix.accelerators[name]


def _at(version: ToolkitVersion, message: str) -> InputError:
    where = version.where
    if where is None:
        return InputError(message, field="VERSION")
    return InputError(message, file=where.file, line=where.line, column=where.column,
                      field="VERSION")


def _validated(path: str, text: str, what: str) -> Matrix:
    try:
        return parse(text, path)
    except InputError as exc:
        raise InputError(f"{what} would make the matrix invalid (line numbers of the edited "
                         f"text; the file is unchanged): {exc.message}", file=exc.file,
                         line=exc.line, column=exc.column, field=exc.field) from None


def _insertion_index(versions: tuple[ToolkitVersion, ...], version: str) -> int:
    """Keep the list's order: newest first unless the file lists oldest first."""
    parts = tuple(int(p) for p in version.split("."))
    existing = [v.parts for v in versions]
    if len(existing) > 1 and existing == sorted(existing):
        return sum(1 for p in existing if p < parts)
    return sum(1 for p in existing if p > parts)


def _var_value(text: str) -> Any:
    """A `--var` value as the matrix file would hold it: typed as YAML 1.2 reads the plain
    scalar (`3` an int, `true` a bool, `on` and `1:20` text), and quoted where the matrix
    loader's YAML 1.1 rules would read the text as something else (`on` -> true, `1:20` ->
    80) or would not read it back as given (` padded `, `x # y`, `'q'`), so that loading
    the file gives back exactly this value."""
    import yaml
    from ruamel.yaml import YAML
    from ruamel.yaml.scalarstring import SingleQuotedScalarString

    try:
        value = YAML(typ="safe", pure=True).load(text)
    except Exception:  # not a plain scalar: keep the text
        value = text
    if not isinstance(value, (str, int, float, bool)) or value is None:
        value = text
    try:
        as_11 = yaml.safe_load(text)
    except yaml.YAMLError:
        as_11 = None
    if isinstance(value, str) and (value != text or as_11 != value or
                                   type(as_11) is not str):
        return SingleQuotedScalarString(text)  # written as given: spaces, '#', quotes
    if not isinstance(value, str) and (as_11 != value or type(as_11) is not type(value)):
        return SingleQuotedScalarString(text)  # the two rule sets disagree: keep the text
    return value


def _version_entry(new: NewVersion, *, flow: bool) -> Any:
    from ruamel.yaml.comments import CommentedMap

    entry = CommentedMap()
    entry["version"] = new.version
    if new.native_driver is not None:
        entry["native_driver"] = new.native_driver
    if new.eol is not None:
        entry["eol"] = new.eol
    if new.vars:
        entry["vars"] = _variables(new.vars)
    if flow:
        entry.fa.set_flow_style()
    return entry


def _bump(entry: Any, new: NewVersion) -> None:
    """ENTRY (a version's mapping in the file) made NEW's: its version, the driver and EOL
    when given, its vars replaced by NEW's."""
    entry["version"] = new.version
    if new.native_driver is not None:
        entry.pop("min_driver", None)
        entry["native_driver"] = new.native_driver
    if new.eol is not None:
        entry["eol"] = new.eol
    entry.pop("vars", None)
    if new.vars:
        entry["vars"] = _variables(new.vars)


def _variables(given: Mapping[str, str]) -> Any:
    from ruamel.yaml.comments import CommentedMap

    variables = CommentedMap((name, _var_value(text)) for name, text in given.items())
    variables.fa.set_flow_style()  # the shipped matrix writes vars on one line
    return variables


def _parts(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _is_flow(node: Any) -> bool:
    return bool(getattr(node, "fa", None) and node.fa.flow_style())


class _RoundTrip:
    """A matrix text loaded with ruamel.yaml, dumped back with the file's own indentation."""

    # (mapping indent, dash offset) pairs people write; the sequence content follows the dash.
    STYLES = ((2, 2), (2, 0), (4, 2), (4, 0), (4, 4))

    def __init__(self, text: str) -> None:
        from ruamel.yaml import YAML

        self.original = text
        self.yaml = YAML()
        self.yaml.preserve_quotes = True
        self.yaml.width = 4096  # never re-wrap a long line
        self.data = self.yaml.load(text)
        # ruamel's guess_indent mixes mapping and sequence indents up: try each style and
        # keep the one that reproduces most lines, so inserted lines match their neighbours.
        original = set(text.splitlines())
        best = -1
        for mapping, offset in self.STYLES:
            self.yaml.indent(mapping=mapping, sequence=offset + 2, offset=offset)
            dumped = self._dump()
            score = sum(1 for line in dumped.splitlines() if line in original)
            if score > best:
                best, self.normalized, style = score, dumped, (mapping, offset)
        self.yaml.indent(mapping=style[0], sequence=style[1] + 2, offset=style[1])

    def _dump(self) -> str:
        stream = io.StringIO()
        self.yaml.dump(self.data, stream)
        return stream.getvalue()

    def carried_over(self) -> str:
        """The original text with the edit (ruamel's unedited -> edited text) applied to it."""
        original = self.original.splitlines(keepends=True)
        normalized = self.normalized.splitlines(keepends=True)
        edited = self._dump().splitlines(keepends=True)
        # Line i of ruamel's text is line to_original[i] of the file where both align 1:1.
        to_original: dict[int, int] = {}
        matcher = difflib.SequenceMatcher(None, normalized, original, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                to_original.update((i1 + k, j1 + k) for k in range(i2 - i1))
        to_original[len(normalized)] = len(original)

        result: list[str] = []
        copied = 0  # original lines before this index are in result already
        matcher = difflib.SequenceMatcher(None, normalized, edited, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            if i1 not in to_original or (i2 > i1 and i2 - 1 not in to_original):
                # The edit touches lines ruamel reshaped beyond recognition: keep its text.
                return "".join(edited)
            start = to_original[i1]
            end = to_original[i2 - 1] + 1 if i2 > i1 else start
            result.extend(original[copied:start])
            result.extend(edited[j1:j2])
            copied = end
        result.extend(original[copied:])
        return "".join(result)
