"""aipcc-build index: static per-variant wheel indexes, published atomically.

Each variant of the matrix's `wheel_index` pattern (cuda12.8-ubi9, cpu-ubi9, ...) gets the
directory its URL names below ROOT, ROOT being the URL up to the first segment with a
field: `https://host/rhoai/{release}/{variant}/simple/` puts cuda12.8-ubi9 of release 3.0 at
ROOT/3.0/cuda12.8-ubi9, its pages under simple/. That directory is a symbolic link to one
generation of the index:

    ROOT/3.0/cuda12.8-ubi9 -> .generations/cuda12.8-ubi9/g000007
    ROOT/3.0/.generations/cuda12.8-ubi9/
        g000007/simple/index.html, g000007/simple/<project>/index.html
        g000007/files -> ../files          (the pool, shared by the generations)
        g000007.json                       (the manifest: what g000007 holds)
        files/<sha256[:2]>/<sha256>/<wheel> and <wheel>.metadata

A new generation is written beside the current one and made current by renaming one
symbolic link over the other: a client reading during an update sees the old index or the
new one, never a mix. Wheels live in the pool under their hash, so a page of the old
generation still finds its files after the switch. The newest `keep` older generations
stay; older ones, and pool files no kept generation links, are removed.

Everything is read and judged before anything is written: one wheel refused (another
toolkit's, judged as the validator judges an image of the variant) and nothing is published.
An unchanged wheel (same name, size and modification time as in the current manifest) is
not read again, and an unchanged project's page is linked from the current generation.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional, Union

from ..errors import InputError, Interrupted
from ..fsutil import write_atomic
from ..matrix import Matrix
from ..validate.results import Evidence
from . import simple_index
from .variants import (
    DEFAULT_KEEP,
    IndexResult,
    IndexTarget,
    Refusal,
    VariantResult,
    judge_wheels,
    switched_before_the_stop,
    targets,
)
from .wheel_file import CHUNK, WheelError, WheelFacts, metadata_of, open_wheel

GENERATIONS = ".generations"
POOL = "files"
# 2: evidence carries the distribution, how it was found, and whether it is a build record;
# wheels read by schema 1 were read without vendored runtimes: read again.
MANIFEST_SCHEMA = 2
_GENERATION = re.compile(r"^g(\d{6,})$")


@dataclass(frozen=True)
class TreeRequest:
    root: str  # the directory the indexes' root URL serves
    wheels: Mapping[str, tuple[str, ...]]  # versioned variant -> directories of wheels
    dry_run: bool = False
    keep: int = DEFAULT_KEEP  # older generations kept besides the current one


@dataclass
class _Plan:
    target: IndexTarget
    current: Optional[int]
    previous: dict[str, WheelFacts]  # the current manifest's wheels by file name
    wheels: dict[str, tuple[Path, WheelFacts]] = field(default_factory=dict)
    metadata: dict[str, bytes] = field(default_factory=dict)  # of wheels read this run
    reused: int = 0
    generation: Optional[int] = None  # written by this run, not yet current
    created: list[Path] = field(default_factory=list)  # what removing it takes


# A destination that cannot take the generation (full, over quota, read-only, or losing
# bytes: a file read back differs, EIO): the run's result is every variant not switched,
# not an input error.
DESTINATION_FULL_OR_READ_ONLY = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS,
                                           errno.EFBIG, errno.EIO})


def publish(matrix: Matrix, request: TreeRequest) -> IndexResult:
    """Judge every wheel of every variant; then (unless a dry run, or a wheel is refused)
    write a new generation of each variant whose wheels changed, and only once every one is
    written, switch them one after another; then read again what each tree serves."""
    if request.keep < 0:
        raise InputError("cannot keep fewer than 0 older generations", field="keep")
    root = Path(request.root)
    if root.exists() and not root.is_dir():
        raise InputError(f"{root}: not a directory", field="root")
    plans, refusals = [], []
    for target in targets(matrix, request.wheels):
        plan, refused = _plan(root, target)
        plans.append(plan)
        refusals.extend(refused)
    if refusals:
        return IndexResult(str(root), request.dry_run, refusals=tuple(refusals))
    if request.dry_run:
        return IndexResult(str(root), True, variants=tuple(
            _summary(root, plan, _next_generation(root, plan.target, plan.current)
                     if _changed(plan) else plan.current) for plan in plans))
    todo = [plan for plan in plans if _changed(plan)]
    results = _publish(root, todo, request.keep) if todo else {}
    return IndexResult(str(root), False, variants=tuple(
        results.get(id(plan)) or _summary(root, plan, plan.current,
                                          served=_served(root, plan.target))
        for plan in plans))


# ---- reading and judging: nothing below writes ----------------------------------------


def _generations_dir(root: Path, target: IndexTarget) -> Path:
    parent, _, name = target.directory.rpartition("/")
    return root / parent / GENERATIONS / name


def _current(root: Path, target: IndexTarget) -> Optional[int]:
    path = root / target.directory
    if not path.is_symlink():
        if path.exists():
            raise InputError(f"{path}: not an index published by aipcc-build index (not a "
                             "link to a generation): move it away", field="root")
        return None
    match = _GENERATION.match(os.path.basename(os.readlink(path)))
    if match is None:
        raise InputError(f"{path}: links to {os.readlink(path)}, not to a generation",
                         field="root")
    return int(match.group(1))


def _plan(root: Path, target: IndexTarget) -> tuple[_Plan, list[Refusal]]:
    current = _current(root, target)
    previous = {}
    if current is not None:
        manifest = _generations_dir(root, target) / f"{_name(current)}.json"
        previous = {f.filename: f for f in read_manifest(manifest)}
    judged = judge_wheels(target, previous)
    plan = _Plan(target, current, previous, judged.wheels, judged.metadata, judged.reused)
    return plan, judged.refusals


def _served(root: Path, target: IndexTarget) -> Optional[int]:
    """The generation the tree serves now, read from its link."""
    try:
        return _current(root, target)
    except InputError:
        return None


def _changed(plan: _Plan) -> bool:
    if plan.current is None:
        return True
    now = {name: facts.sha256 for name, (_, facts) in plan.wheels.items()}
    return now != {name: facts.sha256 for name, facts in plan.previous.items()}


def _next_generation(root: Path, target: IndexTarget, current: Optional[int]) -> int:
    numbers = [current or 0]
    with contextlib.suppress(FileNotFoundError):
        numbers += [int(m.group(1)) for m in map(_GENERATION.match, os.listdir(
            _generations_dir(root, target))) if m]
    return max(numbers) + 1


def _summary(root: Path, plan: _Plan, generation: Optional[int],
             pruned: tuple[int, ...] = (), *, served: Optional[int] = None,
             switched: bool = False, error: Optional[str] = None) -> VariantResult:
    now = set(plan.wheels)
    before = set(plan.previous)
    return VariantResult(
        variant=plan.target.variant, url=plan.target.url,
        path=str(root / plan.target.directory), generation=generation,
        previous=plan.current, wheels=len(now), added=tuple(sorted(now - before)),
        removed=tuple(sorted(before - now)), reused=plan.reused, pruned=pruned,
        served=served, switched=switched, error=error)


def _name(generation: int) -> str:
    return f"g{generation:06d}"


# ---- writing one generation -------------------------------------------------------------


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One publisher per variant at a time (flock on the generations directory)."""
    handle = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def _publish(root: Path, plans: Sequence[_Plan], keep: int) -> dict[int, VariantResult]:
    """Every plan's generation written (each variant locked for the whole run), then the
    switches; a switch that fails stops the others. Results by id(plan)."""
    with contextlib.ExitStack() as locks:
        try:
            for plan in sorted(plans, key=lambda p: str(_generations_dir(root, p.target))):
                generations = _generations_dir(root, plan.target)
                # Removed again, newest first, unless the generation becomes current.
                missing = [p for p in reversed([generations, *generations.parents])
                           if not p.exists()]
                generations.mkdir(parents=True, exist_ok=True)
                plan.created = missing
                locks.enter_context(_locked(generations))
            for plan in plans:
                _write(root, plan)
        except OSError as exc:
            for plan in plans:
                _remove_created(plan)
            if exc.errno not in DESTINATION_FULL_OR_READ_ONLY:
                if exc.filename is None:
                    raise OSError(exc.errno, exc.strerror, str(root)) from None
                raise  # a file where a directory is wanted...: the input's fault (exit 2)
            # A full or read-only destination: nothing was switched, every variant still
            # serves what it served; each is a result (exit 1, --json printed), not bad input.
            where = exc.filename or root
            why = f"not switched: writing {where} failed: {exc.strerror or exc}"
            return {id(plan): _summary(root, plan, plan.generation, error=why,
                                       served=_served(root, plan.target))
                    for plan in plans}
        except BaseException:
            for plan in plans:
                _remove_created(plan)
            raise
        results: dict[int, VariantResult] = {}
        try:
            _switch_all(root, plans, keep, results)
        except BaseException as exc:
            # Interrupted (a signal): what was not switched is not served; remove it.
            for plan in plans:
                if id(plan) not in results:
                    _remove_created(plan)
            if isinstance(exc, Interrupted):
                exc.done.append(switched_before_the_stop(
                    [p.target.variant for p in plans
                     if id(p) in results and results[id(p)].switched],
                    [p.target.variant for p in plans
                     if id(p) not in results or not results[id(p)].switched]))
            raise
    return results


def _switch_all(root: Path, plans: Sequence[_Plan], keep: int,
                results: dict[int, VariantResult]) -> None:
    """Each plan's generation made current, in order; after a switch fails, the rest are
    not switched (their generations removed). A variant's result is in RESULTS once it is
    settled."""
    failed: Optional[str] = None
    for plan in plans:
        assert plan.generation is not None
        target = plan.target
        if failed is not None:
            _remove_created(plan)
            results[id(plan)] = _summary(root, plan, plan.generation, error=f"not "
                                         f"switched: {failed}", served=plan.current)
            continue
        generations = _generations_dir(root, target)
        try:
            _switch(root / target.directory,
                    f"{GENERATIONS}/{generations.name}/{_name(plan.generation)}")
        except OSError as exc:
            _remove_created(plan)
            failed = f"switching {target.variant} failed: {exc.strerror or exc}"
            results[id(plan)] = _summary(root, plan, plan.generation, error=failed,
                                         served=_served(root, target))
            continue
        plan.created = []  # served now: nothing of it may be removed
        pruned = _prune(generations, plan.generation, keep)
        served = _served(root, target)
        error = None if served == plan.generation else \
            f"serves {'nothing' if served is None else _name(served)}, not the " \
            f"{_name(plan.generation)} this run switched to: another publisher " \
            "changed it"
        results[id(plan)] = _summary(root, plan, plan.generation, pruned, served=served,
                                     switched=True, error=error)


def _write(root: Path, plan: _Plan) -> None:
    """PLAN's next generation written beside the current one (under the variant's lock)."""
    target = plan.target
    generations = _generations_dir(root, target)
    if _current(root, target) != plan.current:
        raise InputError(f"{root / target.directory}: another publisher changed it "
                         "meanwhile: run again", field="root")
    _remove_interrupted(root / target.directory, generations)
    plan.generation = _next_generation(root, target, plan.current)
    _write_generation(generations, plan, plan.generation, plan.created)


def _remove_created(plan: _Plan) -> None:
    for path in reversed(plan.created):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    plan.created = []


def _remove_interrupted(link: Path, generations: Path) -> None:
    """What a publish killed midway left (under the lock: no publisher is running): its
    staging generation and temporary files, its half-made switch link. Every name that
    starts with '.' there is one."""
    for path in generations.glob(".*"):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    for path in link.parent.glob(f".{link.name}.switch-*"):
        path.unlink(missing_ok=True)


def _write_generation(generations: Path, plan: _Plan, generation: int,
                      created: list[Path]) -> None:
    name = _name(generation)
    staging = generations / f".{name}.tmp-{os.getpid()}"
    created.append(staging)
    staging.mkdir()
    pages = staging / plan.target.pages if plan.target.pages else staging
    up = "../" * (len(plan.target.pages.split("/")) + 1 if plan.target.pages else 1)
    by_project: dict[str, list[WheelFacts]] = {}
    for path, facts in plan.wheels.values():
        known = plan.previous.get(facts.filename)
        if known is None or known.sha256 != facts.sha256:
            # (The current generation's wheels are in the pool: it is never pruned.)
            _add_to_pool(generations, path, facts, plan.metadata.get(facts.filename), created)
        by_project.setdefault(facts.project, []).append(facts)
    before: dict[str, list[WheelFacts]] = {}
    for facts in plan.previous.values():
        before.setdefault(facts.project, []).append(facts)
    current_pages = None
    if plan.current is not None:
        current = generations / _name(plan.current)
        current_pages = current / plan.target.pages if plan.target.pages else current
    pages.mkdir(parents=True, exist_ok=True)
    # Plain strings and os calls: this loop runs once per project, thousands of times.
    into, linked_from = str(pages), str(current_pages) if current_pages else None
    for project, files in sorted(by_project.items()):
        files.sort(key=lambda f: f.filename)
        os.mkdir(f"{into}/{project}")
        page = f"{into}/{project}/index.html"
        old = sorted(before.get(project, []), key=lambda f: f.filename)
        if linked_from is not None and old == files and _link(
                f"{linked_from}/{project}/index.html", page):
            continue  # unchanged: the current generation's page, linked
        with open(page, "w") as handle:
            handle.write(simple_index.project_page(project, [simple_index.FileLink(
                filename=f.filename, url=up + _pool_path(f), sha256=f.sha256,
                requires_python=f.requires_python, metadata_sha256=f.metadata_sha256)
                for f in files]))
    (pages / "index.html").write_text(simple_index.root_page(sorted(by_project), generation))
    os.symlink(f"../{POOL}", staging / POOL)
    manifest = generations / f"{name}.json"
    created.append(manifest)
    write_manifest(manifest, generation, plan.target, [f for _, f in plan.wheels.values()])
    final = generations / name
    os.rename(staging, final)
    created.append(final)


def _pool_path(facts: WheelFacts) -> str:
    return f"{POOL}/{facts.sha256[:2]}/{facts.sha256}/{facts.filename}"


def _add_to_pool(generations: Path, path: Path, facts: WheelFacts,
                 metadata: Optional[bytes], created: list[Path]) -> None:
    """The wheel and its core metadata in the pool, under the wheel's hash (a rebuilt wheel
    of the same name is another entry: a page never links changed bytes). Copies, never
    links: a source rewritten in place later must not change what is served. Each file is
    written whole and renamed in place, so one that exists is complete."""
    wheel = generations / _pool_path(facts)
    entry = wheel.parent
    for directory in (entry.parent.parent, entry.parent, entry):
        if not directory.exists():
            directory.mkdir()
            created.append(directory)
    for leftover in entry.glob(".*"):  # an interrupted publish's temporary file
        leftover.unlink(missing_ok=True)
    core = entry / f"{facts.filename}.metadata"
    if not core.exists():
        write_atomic(core, metadata if metadata is not None else _source(metadata_of, path))
    if not wheel.exists():
        write_atomic(wheel, _copy(path, facts.sha256))


def _copy(path: Path, sha256: str) -> Iterator[bytes]:
    """The bytes of the wheel at PATH, checked against the hash its page will give."""
    digest = hashlib.sha256()
    with _source(open_wheel, path) as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            yield chunk
    if digest.hexdigest() != sha256:
        raise InputError(f"{path}: changed while it was published: run again",
                         field="wheels")


def _source(reader: Any, path: Path) -> Any:
    """READER(PATH), a source that became unreadable since it was judged an input error."""
    try:
        return reader(path)
    except WheelError as exc:
        raise InputError(f"{path}: {exc}", field="wheels") from None


def _link(source: Union[str, Path], destination: Union[str, Path]) -> bool:
    """A hard link between two generations' pages (written once, never changed); False
    where the file system cannot link."""
    try:
        os.link(source, destination)
    except OSError as exc:
        if exc.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOENT):
            return False
        raise
    return True


def _switch(link: Path, target: str) -> None:
    """Point LINK at TARGET with one rename: readers see the old generation or the new."""
    link.parent.mkdir(parents=True, exist_ok=True)
    staged = link.with_name(f".{link.name}.switch-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        staged.unlink()
    os.symlink(target, staged)
    try:
        os.replace(staged, link)
    except BaseException:
        staged.unlink()
        raise


def _prune(generations: Path, current: int, keep: int) -> tuple[int, ...]:
    """Remove generations older than the KEEP newest before CURRENT, then the pool entries
    no remaining generation links."""
    numbers = sorted(int(m.group(1)) for m in map(_GENERATION.match, os.listdir(generations))
                     if m)
    older = [n for n in numbers if n < current]
    doomed = older[:max(len(older) - keep, 0)]
    for number in doomed:
        # The manifest last: a generation half removed by a killed run is still listed.
        shutil.rmtree(generations / _name(number), ignore_errors=True)
        (generations / f"{_name(number)}.json").unlink(missing_ok=True)
    if not doomed:
        return ()  # every pool entry is still linked by a generation kept
    wanted = {facts.sha256 for number in numbers if number not in doomed
              for facts in read_manifest(generations / f"{_name(number)}.json")}
    pool = generations / POOL
    for prefix in pool.glob("*") if pool.is_dir() else []:
        for entry in prefix.iterdir():
            if entry.name not in wanted:
                shutil.rmtree(entry, ignore_errors=True)
        with contextlib.suppress(OSError):
            prefix.rmdir()  # only when empty
    return tuple(doomed)


# ---- the manifest: what one generation holds (this module reads and writes it) ----------


_FACT_FIELDS = [f.name for f in fields(WheelFacts)]


def write_manifest(path: Path, generation: int, target: IndexTarget,
                   wheels: Sequence[WheelFacts]) -> None:
    records = []
    for facts in sorted(wheels, key=lambda f: f.filename):
        record: dict[str, Any] = {name: getattr(facts, name) for name in _FACT_FIELDS}
        record["evidence"] = [[e.kind, e.path, e.toolkit, e.component, e.version, e.release,
                               e.distribution, e.detail, e.built] for e in facts.evidence]
        records.append(record)
    write_atomic(path, json.dumps({"schema": MANIFEST_SCHEMA, "generation": generation,
                                   "variant": target.variant, "url": target.url,
                                   "wheels": records}, separators=(",", ":")))


def read_manifest(path: Path) -> list[WheelFacts]:
    """The wheels of a generation's manifest; [] when it is missing or not ours (nothing is
    then reused: every wheel is read again)."""
    try:
        data = json.loads(path.read_text())
        if data.get("schema") != MANIFEST_SCHEMA:
            return []
        return [WheelFacts(**{**record, "evidence": tuple(
            Evidence(*e) for e in record["evidence"])}) for record in data["wheels"]]
    except (OSError, ValueError, TypeError, KeyError):
        return []
