"""Judge a requirements set before a build: which toolkit release each distribution that pip
or uv would install belongs to, and which requested requirement brings it.

The set comes resolved (pip's `install --dry-run --report` JSON, a PEP 751 `pylock.toml`, a
`uv.lock`) or as a requirements file that pip resolves here, in dry-run: only metadata is
fetched. Each resolved distribution is judged as the validator judges a `.dist-info`
directory in an image (`distributions.wheel_evidence`, `verdict.judge_evidence`): NVIDIA's
component wheels through the component table, `+cu129` local versions, `-cu12`/`cuda12x`
names. One reader per format; nothing here prints.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError
from ..fsutil import read_regular
from .results import FAILING, OK, Expectation, Finding

# pip's resolution of a requirements file: a dry run that reports in JSON and downloads
# only what PEP 658 metadata cannot answer.
RESOLVE_TIMEOUT = 900.0
# The most of pip's report read: it holds every distribution's whole metadata, long
# descriptions included, and a few hundred distributions with long READMEs pass the
# runner's default bound.
MAX_PIP_REPORT = 256 * 1024 * 1024
# The longest line of a requirements file read: a requirement with its markers and a few
# dozen hashes fits many times over (continued lines are lines of their own).
MAX_REQUIREMENT_LINE = 65536
# The variables by which pip takes constraints (build constraints: pip 25.3 and later).
_PIP_CONSTRAINT_SETTINGS = ("PIP_CONSTRAINT", "PIP_BUILD_CONSTRAINT")


@dataclass(frozen=True)
class Distribution:
    name: str  # normalized: "nvidia-cuda-runtime-cu12"
    version: str
    brought_by: tuple[str, ...] = ()  # the requested distributions that pull it in


@dataclass(frozen=True)
class RequirementsVerdict:
    source: str  # the file judged
    expected: Expectation
    distributions: tuple[Distribution, ...]
    findings: tuple[Finding, ...]  # one per distribution that says anything of a toolkit

    @property
    def ok(self) -> bool:
        return not any(f.status in FAILING for f in self.findings)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _brought_by(names: Sequence[str], requested: Sequence[str],
                edges: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """Distribution -> the requested ones whose dependencies reach it (itself if requested)."""
    reached: dict[str, set[str]] = {name: set() for name in names}
    for root in requested:
        pending, seen = [root], set()
        while pending:
            name = pending.pop()
            if name in seen or name not in reached:
                continue
            seen.add(name)
            reached[name].add(root)
            pending.extend(edges.get(name, ()))
    return {name: tuple(sorted(roots)) for name, roots in reached.items()}


def _graph(items: Sequence[tuple[str, str, bool, Sequence[str]]]) -> tuple[Distribution, ...]:
    """Distributions from (name, version, requested, dependency names)."""
    names = [name for name, _, _, _ in items]
    requested = [name for name, _, wanted, _ in items if wanted] or names
    edges = {name: [_normalize(d) for d in deps] for name, _, _, deps in items}
    roots = _brought_by(names, requested, edges)
    return tuple(Distribution(name, version, roots[name]) for name, version, _, _ in items)


def _pip_report(data: Mapping[str, Any], source: str) -> tuple[Distribution, ...]:
    items = []
    for index, entry in enumerate(data.get("install") or []):
        metadata = entry.get("metadata") if isinstance(entry, Mapping) else None
        if not isinstance(metadata, Mapping) or not metadata.get("name") \
                or not metadata.get("version"):
            raise InputError("a pip report entry without metadata name and version",
                             file=source, field=f"install[{index}]")
        deps = []
        for requirement in metadata.get("requires_dist") or []:
            spec, _, marker = str(requirement).partition(";")
            match = _NAME.match(spec)
            if match and not re.search(r"\bextra\s*==", marker):
                deps.append(match.group(1))
        items.append((_normalize(str(metadata["name"])), str(metadata["version"]),
                      bool(entry.get("requested")), deps))
    return _graph(items)


def _toml(text: str, source: str) -> Mapping[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not TOML: {exc}", file=source) from None


def _name_and_version(filename: str) -> Optional[tuple[str, str]]:
    """(name, version) of a wheel's (NAME-VERSION[-BUILD]-PY-ABI-PLATFORM.whl) or an sdist's
    (NAME-VERSION.tar.gz, .zip) file name; None for another file."""
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        return (parts[0], parts[1]) if len(parts) in (5, 6) else None
    for suffix in (".tar.gz", ".zip"):
        if filename.endswith(suffix):
            name, _, version = filename[:-len(suffix)].rpartition("-")
            return (name, version) if name and version[:1].isdigit() else None
    return None


def _archive_names(entry: Mapping[str, Any]) -> list[str]:
    """The file names of the archives a lock entry records (wheels, sdist, archive: their
    `name`, or the last part of their `url` or `path`)."""
    archives: list[Any] = []
    for key in ("sdist", "archive"):
        if isinstance(entry.get(key), Mapping):
            archives.append(entry[key])
    if isinstance(entry.get("wheels"), list):
        archives.extend(entry["wheels"])
    names = []
    for archive in archives:
        if not isinstance(archive, Mapping):
            continue
        for key in ("name", "filename", "url", "path"):
            value = archive.get(key)
            if isinstance(value, str) and value:
                names.append(value.split("#", 1)[0].split("?", 1)[0].rstrip("/")
                             .rsplit("/", 1)[-1])
                break
    return names


def _version(entry: Mapping[str, Any], name: str, source: str, field: str) -> str:
    """The entry's version, or, where the lock leaves it out (optional in PEP 751), the one
    its archives' file names say; a lock entry judged without a version would pass whatever
    it installs, so one that says none is refused."""
    if entry.get("version"):
        return str(entry["version"])
    found: set[str] = set()
    for filename in _archive_names(entry):
        said = _name_and_version(filename)
        if said and _normalize(said[0]) == name:
            found.add(said[1])
    if len(found) == 1:
        return found.pop()
    archives = f"archives of several versions ({', '.join(sorted(found))})" if found else \
        "no archive whose file name says one"
    raise InputError(f"{name} has no version and {archives}: a set that cannot be judged is "
                     "not passed", file=source, field=f"{field}.version")


def _pylock(data: Mapping[str, Any], source: str) -> tuple[Distribution, ...]:
    """PEP 751: [[packages]] with name and version; no dependency graph is recorded."""
    items = []
    for index, entry in enumerate(data.get("packages") or []):
        if not isinstance(entry, Mapping) or not entry.get("name"):
            raise InputError("a package without a name", file=source,
                             field=f"packages[{index}]")
        name = _normalize(str(entry["name"]))
        items.append((name, _version(entry, name, source, f"packages[{index}]"), False, ()))
    return _graph(items)


def _uv_lock(data: Mapping[str, Any], source: str) -> tuple[Distribution, ...]:
    """uv.lock: [[package]] with name, version, dependencies; the project's own packages
    (editable or virtual sources) request the rest and are not judged themselves."""
    items: list[tuple[str, str, bool, Sequence[str]]] = []
    roots: list[str] = []
    for index, entry in enumerate(data.get("package") or []):
        if not isinstance(entry, Mapping) or not entry.get("name"):
            raise InputError("a package without a name", file=source,
                             field=f"package[{index}]")
        name = _normalize(str(entry["name"]))
        deps = [str(d.get("name")) for d in entry.get("dependencies") or []
                if isinstance(d, Mapping) and d.get("name")]
        local = isinstance(entry.get("source"), Mapping) and \
            ({"editable", "virtual"} & set(entry["source"]))
        if local:
            roots.extend(_normalize(d) for d in deps)
            continue
        items.append((name, _version(entry, name, source, f"package[{index}]"), False, deps))
    items = [(n, v, n in roots, d) for n, v, _, d in items]
    return _graph(items)


def read_resolved(path: Path) -> Optional[tuple[Distribution, ...]]:
    """The distributions of a resolved set at PATH (pip report, pylock.toml, uv.lock);
    None when PATH is a requirements file, which needs resolving first."""
    source = str(path)
    try:
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise InputError(f"cannot read the requirements: {why}", file=source) from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InputError(f"not JSON: {exc}", file=source) from None
        if not isinstance(data, Mapping) or "install" not in data:
            raise InputError("not a pip installation report (no 'install' list)",
                             file=source)
        return _pip_report(data, source)
    name = path.name
    if name == "uv.lock":
        return _uv_lock(_toml(text, source), source)
    if name == "pylock.toml" or re.match(r"^pylock\.[^.]+\.toml$", name):
        return _pylock(_toml(text, source), source)
    _lines_bounded(text, source)
    return None


def _lines_bounded(text: str, source: str) -> None:
    """InputError naming the line of TEXT, a requirements file, longer than any
    requirement is (MAX_REQUIREMENT_LINE): pip would look its megabytes up as a name on
    the index, and its error would echo them several times over."""
    start, number = 0, 1
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if end - start > MAX_REQUIREMENT_LINE:
            raise InputError(f"a line of {end - start} characters: no requirement is longer "
                             f"than {MAX_REQUIREMENT_LINE}", file=source, line=number)
        start, number = end + 1, number + 1


def parse_report(text: str, source: str) -> tuple[Distribution, ...]:
    """The distributions of pip's JSON report TEXT."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"pip's report is not JSON: {exc}", file=source) from None
    return _pip_report(data, source)


def judge_requirements(source: str, distributions: Sequence[Distribution],
                       expected: Expectation) -> RequirementsVerdict:
    """Each distribution judged as its .dist-info in an image of EXPECTED would be."""
    from .distributions import wheel_evidence
    from .verdict import judge_evidence, place

    findings = []
    for dist in distributions:
        evidence = wheel_evidence(source, dist.name, dist.version)
        if evidence is None:
            continue
        status, reason = judge_evidence(evidence, place(evidence), expected)
        brought = [b for b in dist.brought_by if b != dist.name]
        if brought:
            reason += f"; brought by {', '.join(brought)}"
        releases = place(evidence)
        findings.append(Finding(
            status, "requirement", source, reason, toolkit=evidence.toolkit,
            version=", ".join(releases) if releases else None, component=dist.name,
            component_version=dist.version,
            distribution=", ".join(dist.brought_by) or None))
    findings.sort(key=lambda f: (f.status == OK, f.component or ""))
    return RequirementsVerdict(source, expected, tuple(distributions), tuple(findings))


@dataclass(frozen=True)
class RequirementsRequest:
    path: Path  # a requirements file, pip report, pylock.toml or uv.lock
    expected: Expectation
    index_url: Optional[str] = None  # resolve against this index (default: pip's config)


def resolve(path: Path, index_url: Optional[str], runner: Any = None
            ) -> tuple[Distribution, ...]:
    """The distributions pip would install for the requirements file at PATH, from a dry
    run of this Python's pip (nothing is installed; only metadata is fetched where the
    index serves it)."""
    from ..errors import ToolError
    from ..tools.runner import ProcessRunner

    # pip's own resolution is the judge: constraints of the caller's environment (a CPU
    # image's PIP_CONSTRAINT, /etc/pip.conf's `constraint`) would refuse or narrow the very
    # set being judged. An empty variable overrides the config files' setting too.
    argv = ["env", *(f"{variable}=" for variable in _PIP_CONSTRAINT_SETTINGS),
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
            "--quiet", "--report", "-", "--requirement", str(path)]
    if index_url:
        argv += ["--index-url", index_url]
    try:
        done = (runner or ProcessRunner()).run(argv, timeout=RESOLVE_TIMEOUT,
                                               max_stdout=MAX_PIP_REPORT)
    except ToolError as exc:
        raise InputError(f"pip cannot resolve the requirements: {exc}", file=str(path)) \
            from None
    return parse_report(done.text, str(path))


def check_requirements(request: RequirementsRequest, runner: Any = None
                       ) -> RequirementsVerdict:
    """Read (or resolve) the set of REQUEST and judge it against its expectation."""
    distributions = read_resolved(request.path)
    if distributions is None:
        distributions = resolve(request.path, request.index_url, runner)
    return judge_requirements(str(request.path), distributions, request.expected)
