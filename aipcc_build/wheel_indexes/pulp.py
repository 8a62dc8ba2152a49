"""aipcc-build index pulp+https://HOST: per-variant wheel indexes published to Pulp.

Each variant of the matrix's `wheel_index` (https://cdn/api/pypi/<domain>/<base_path>/simple/,
pulp_python's URL shape) is one pulp_python repository and one distribution, both named by
the base path. A run:

1. reads and judges every wheel of every variant as the static index does: one refusal and
   nothing is sent to Pulp;
2. per variant, compares the wheels with what the distribution serves now (its pinned
   repository version): nothing different, nothing done (no new version);
3. uploads the wheels Pulp does not hold yet (looked up by sha256), makes exactly one new
   repository version with one `modify` (add, remove, base_version = the served version),
   and checks that version holds exactly the wheels asked for;
4. once every variant's version is ready, points each distribution at its new version, one
   after another: a distribution serves one version at a time, so a reader sees the old
   set or the new one, never a page mixing both;
5. deletes versions older than the `keep` newest before the current one.

Each switch first reads the distribution again: one that no longer serves the version this
run started from was switched by another publisher meanwhile, and is left alone (the run
fails, naming the variant and the version served). A switch that fails stops the ones after
it. After the switches every distribution is read again and the result is what it serves.

Pulp keeps no record of what a distribution served before; the publisher does, in the
distribution's label `aipcc_build_history` (the versions it served before, oldest first,
readable by anyone who can read the distribution). `rollback` points a distribution back at
the last of them and drops it from the history, so that a rollback after publish A, B,
rollback, C goes back to A, never to the B the operator had rolled back. A version deleted
since (`keep`) is refused, not replaced by another.

Repositories are made, and kept, with pulp_python's `allow_package_substitution` off where
the server knows it (pulp_python >= 3.28): a file name then always means the same bytes.

A failure before step 4 leaves every distribution as it was; a version made by a run that
failed afterwards is found again and used by the next run, not made twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from ..errors import InputError, Interrupted
from ..matrix import Matrix
from .pulp_api import Client, NotPulpAPI, PulpError
from .pulp_config import PulpServer
from .variants import (
    DEFAULT_KEEP,
    IndexResult,
    IndexTarget,
    Refusal,
    RollbackResult,
    VariantResult,
    judge_wheels,
    switched_before_the_stop,
    targets,
)
from .wheel_file import WheelFacts

UPLOAD_JOBS = 4  # wheels uploaded at once
_LOOKUP_BATCH = 40  # sha256 values per content query: a request line under 4 KiB (gunicorn)
_FIELDS = "pulp_href,sha256,filename"
HISTORY_LABEL = "aipcc_build_history"  # the versions a distribution served before
HISTORY_LENGTH = 20
SUBSTITUTION = "allow_package_substitution"  # pulp_python >= 3.28


@dataclass(frozen=True)
class PulpRequest:
    server: PulpServer
    wheels: Mapping[str, tuple[str, ...]]  # versioned variant -> directories of wheels
    dry_run: bool = False
    keep: int = DEFAULT_KEEP  # older repository versions kept besides the served one


@dataclass(frozen=True)
class Location:
    """Where a variant lives in Pulp, from its wheel_index URL."""

    domain: Optional[str]
    base_path: str


@dataclass
class _Variant:
    target: IndexTarget
    location: Location
    wheels: dict[str, tuple[Path, WheelFacts]]
    repository: Optional[dict[str, Any]] = None
    distribution: Optional[dict[str, Any]] = None
    served: Optional[str] = None  # the href of the version the distribution serves
    served_content: Optional[dict[str, tuple[str, str]]] = None  # name -> (sha256, href)
    ready: Optional[str] = None  # the version to switch to
    switched: bool = False
    error: Optional[str] = None
    served_after: Optional[int] = None  # read again after the switches


def location(url: str, domain_enabled: bool) -> Location:
    """The domain and base path of a pulp_python index URL: .../pypi/[<domain>/]<base>/simple/."""
    segments = [s for s in urlsplit(url).path.split("/") if s]
    if "pypi" not in segments or segments[-1] != "simple":
        raise InputError(f"{url}: not a Pulp index URL (.../pypi/<base_path>/simple/)",
                         field="wheel_index")
    rest = segments[segments.index("pypi") + 1:-1]
    domain = None
    if domain_enabled:
        if len(rest) < 2:
            raise InputError(f"{url}: this Pulp has domains: the URL must be "
                             ".../pypi/<domain>/<base_path>/simple/", field="wheel_index")
        domain, rest = rest[0], rest[1:]
    if not rest:
        raise InputError(f"{url}: no base path between pypi/ and simple/",
                         field="wheel_index")
    return Location(domain, "/".join(rest))


def _connect(server: PulpServer, urls: Sequence[str],
             make_client: Callable[[PulpServer], Client]) -> tuple[Client, list[Location]]:
    """A client for the server, the domain the URLs name when Pulp has domains."""
    client = make_client(server)
    client.login()
    status = client.get("status/")
    if not isinstance(status, dict):
        raise NotPulpAPI(f"Pulp at {server.base_url} answered its status with "
                         f"{type(status).__name__}: not a Pulp API server")
    enabled = bool(status.get("domain_enabled"))
    locations = [location(url, enabled) for url in urls]
    domains = {loc.domain for loc in locations}
    if enabled:
        if len(domains) != 1:
            raise InputError(f"the variants' URLs name several Pulp domains "
                             f"({', '.join(sorted(str(d) for d in domains))}): publish "
                             "each domain in its own run", field="wheel_index")
        domain = domains.pop()
        if server.domain and server.domain != domain:
            raise InputError(f"the pulp-cli profile's domain is {server.domain}, the "
                             f"matrix's URLs name {domain}", field="profile")
        if server.domain != domain:
            client.logout()
            client = make_client(replace(server, domain=domain))
            client.login()
    return client, locations


def _index_url(server: PulpServer, loc: Location) -> str:
    domain = f"{loc.domain}/" if loc.domain else ""
    return f"{server.base_url}/pypi/{domain}{loc.base_path}/simple/"


def _find(client: Client, path: str, **query: Any) -> Optional[dict[str, Any]]:
    found = client.get(path, **query)["results"]
    return dict(found[0]) if found else None


def _repository_of_version(href: str) -> str:
    return href.rstrip("/").rsplit("/versions/", 1)[0] + "/"


def _number(href: str) -> int:
    return int(href.rstrip("/").rsplit("/", 1)[1])


def _content(client: Client, version: str) -> dict[str, tuple[str, str]]:
    return {unit["filename"]: (unit["sha256"], unit["pulp_href"]) for unit in client.all(
        "content/python/packages/", repository_version=version, fields=_FIELDS)}


def _look(client: Client, variant: _Variant) -> None:
    """What the variant's distribution serves now (nothing is changed)."""
    base_path = variant.location.base_path
    distribution = _find(client, "distributions/python/pypi/", base_path=base_path)
    variant.distribution = distribution
    repository_href = None
    if distribution is not None:
        if distribution.get("publication"):
            raise PulpError(f"distribution {base_path} serves a publication: aipcc-build "
                            "index pins repository versions; point it at its repository "
                            "first")
        if distribution.get("repository_version"):
            variant.served = distribution["repository_version"]
            repository_href = _repository_of_version(variant.served)
        elif distribution.get("repository"):
            repository_href = distribution["repository"]
    if repository_href is not None:
        variant.repository = dict(client.request("GET", repository_href))
        if variant.served is None:
            variant.served = variant.repository["latest_version_href"]
    else:
        variant.repository = _find(client, "repositories/python/python/", name=base_path)
    variant.served_content = _content(client, variant.served) if variant.served else {}


def _wanted(variant: _Variant) -> dict[str, str]:
    return {name: facts.sha256 for name, (_, facts) in variant.wheels.items()}


def _changes(variant: _Variant) -> tuple[list[str], list[str]]:
    wanted, served = _wanted(variant), variant.served_content or {}
    added = sorted(n for n, sha in wanted.items() if served.get(n, ("",))[0] != sha)
    removed = sorted(n for n, (sha, _) in served.items() if wanted.get(n) != sha)
    return added, removed


def _pinned(variant: _Variant) -> bool:
    return variant.distribution is not None and \
        variant.distribution.get("repository_version") == variant.served


def _units(client: Client, variant: _Variant) -> dict[str, str]:
    """sha256 -> content href of every wanted wheel, uploading those Pulp lacks."""
    wanted = _wanted(variant)
    hrefs = {sha: href for sha, href in (variant.served_content or {}).values()}
    missing = sorted({sha for sha in wanted.values() if sha not in hrefs})
    for start in range(0, len(missing), _LOOKUP_BATCH):
        batch = missing[start:start + _LOOKUP_BATCH]
        for unit in client.all("content/python/packages/", sha256__in=",".join(batch),
                               fields=_FIELDS):
            hrefs[unit["sha256"]] = unit["pulp_href"]
    uploads = {facts.sha256: (path, name) for name, (path, facts) in
               sorted(variant.wheels.items()) if facts.sha256 not in hrefs}
    if uploads:
        # Each upload waits on the server's hashing and storing: a few at once.
        pool = ThreadPoolExecutor(max_workers=UPLOAD_JOBS)
        try:
            done = {sha: pool.submit(client.upload, path, name)
                    for sha, (path, name) in uploads.items()}
            for sha, future in done.items():
                hrefs[sha] = future.result()
        finally:
            # A signal or a failed upload: the uploads not started never start (those
            # running end with their requests).
            pool.shutdown(wait=True, cancel_futures=True)
    return hrefs


def _verify(client: Client, variant: _Variant, version: str) -> None:
    held = {name: sha for name, (sha, _) in _content(client, version).items()}
    if held != _wanted(variant):
        extra = sorted(set(held) - set(_wanted(variant)))
        lacking = sorted(set(_wanted(variant)) - set(held))
        raise PulpError(f"{variant.target.variant}: repository version {_number(version)} "
                        f"does not hold what was asked (missing {lacking[:3]}, extra "
                        f"{extra[:3]}): nothing was switched")


def _prepare(client: Client, variant: _Variant) -> None:
    """Make the variant's new repository version and check it (nothing is switched)."""
    base_path = variant.location.base_path
    if variant.repository is None:
        variant.repository = dict(client.request(
            "POST", "repositories/python/python/", payload={
                "name": base_path, "description": f"aipcc-build index: {variant.target.url}",
                SUBSTITUTION: False}))
    if variant.repository.get(SUBSTITUTION):  # (absent: a pulp_python without it)
        client.run("PATCH", variant.repository["pulp_href"], {SUBSTITUTION: False})
        variant.repository[SUBSTITUTION] = False
    latest = variant.repository["latest_version_href"]
    if latest != variant.served and _number(latest) > 0:
        # A run that failed after its modify: its version is what we want again?
        held = {name: sha for name, (sha, _) in _content(client, latest).items()}
        if held == _wanted(variant):
            variant.ready = latest
            return
    hrefs = _units(client, variant)
    served = variant.served_content or {}
    wanted = _wanted(variant)
    add = sorted({hrefs[sha] for name, sha in wanted.items()
                  if served.get(name, ("",))[0] != sha})
    remove = sorted({href for name, (sha, href) in served.items() if wanted.get(name) != sha})
    payload: dict[str, Any] = {"add_content_units": add, "remove_content_units": remove}
    if variant.served:
        payload["base_version"] = variant.served
    task = client.run("POST", variant.repository["pulp_href"] + "modify/", payload)
    versions = [h for h in task.get("created_resources", []) if "/versions/" in h]
    if not versions:
        raise PulpError(f"{variant.target.variant}: Pulp made no repository version for "
                        f"{len(add)} added and {len(remove)} removed wheel(s)")
    _verify(client, variant, versions[0])
    variant.ready = versions[0]


def history(distribution: dict[str, Any]) -> list[int]:
    """The versions DISTRIBUTION served before, oldest first (its history label)."""
    value = (distribution.get("pulp_labels") or {}).get(HISTORY_LABEL) or ""
    return [int(n) for n in value.split() if n.isdigit()]


def _labels(distribution: Optional[dict[str, Any]], numbers: Sequence[int]) -> dict[str, str]:
    labels = dict((distribution or {}).get("pulp_labels") or {})
    labels[HISTORY_LABEL] = " ".join(str(n) for n in numbers[-HISTORY_LENGTH:])
    return labels


def _switch(client: Client, variant: _Variant) -> None:
    """Point the variant's distribution at its new version, unless another publisher
    switched it since this run looked (then variant.error says so)."""
    assert variant.ready is not None
    if variant.distribution is None:
        existing = _find(client, "distributions/python/pypi/",
                         base_path=variant.location.base_path)
        if existing is not None:
            variant.error = _lost(variant, existing.get("repository_version"))
            return
        client.run("POST", "distributions/python/pypi/", {
            "name": variant.location.base_path, "base_path": variant.location.base_path,
            "repository_version": variant.ready, "pulp_labels": _labels(None, [])})
        variant.switched = True
        return
    now = dict(client.request("GET", variant.distribution["pulp_href"]))
    if now.get("repository_version") != variant.distribution.get("repository_version") \
            or now.get("repository") != variant.distribution.get("repository"):
        variant.error = _lost(variant, now.get("repository_version") or now.get("repository"))
        return
    before = history(now)
    if _pinned(variant) and variant.served is not None and variant.served != variant.ready:
        before.append(_number(variant.served))
    client.run("PATCH", variant.distribution["pulp_href"], {
        "repository": None, "repository_version": variant.ready,
        "pulp_labels": _labels(now, before)})
    variant.switched = True


def _lost(variant: _Variant, served: Optional[str]) -> str:
    what = f"version {_number(served)}" if served and "/versions/" in served else \
        "another repository" if served else "nothing"
    return (f"another publisher switched it meanwhile: it serves {what}, not version "
            f"{_number(variant.ready or '/0/')} of this run")


def _served_now(client: Client, variant: _Variant) -> None:
    """What the variant's distribution serves after the switches; a lost race an error."""
    distribution = _find(client, "distributions/python/pypi/",
                         base_path=variant.location.base_path)
    served = (distribution or {}).get("repository_version")
    variant.served_after = _number(served) if served else None
    if variant.switched and served != variant.ready and variant.error is None:
        variant.error = _lost(variant, served)


def _prune(client: Client, variant: _Variant, keep: int) -> tuple[int, ...]:
    """Delete the versions older than the KEEP newest before the served one (version 0,
    the empty start, stays)."""
    assert variant.ready is not None and variant.repository is not None
    current = _number(variant.ready)
    older = sorted(v["number"] for v in client.all(variant.repository["versions_href"],
                                                   fields="number")
                   if 0 < v["number"] < current)
    doomed = tuple(older[:max(len(older) - keep, 0)])
    for number in doomed:
        client.run("DELETE", f"{variant.repository['versions_href']}{number}/")
    return doomed


def _result(server: PulpServer, variant: _Variant, dry_run: bool,
            pruned: tuple[int, ...] = ()) -> VariantResult:
    added, removed = _changes(variant)
    previous = _number(variant.served) if variant.served and _pinned(variant) else None
    if variant.ready is not None:
        generation: Optional[int] = _number(variant.ready)
    elif dry_run and (added or removed or not _pinned(variant)):
        # The number the new version would get (a concurrent modify may take it first).
        latest = (variant.repository or {}).get("latest_version_href")
        generation = _number(latest) + 1 if latest else 1
    else:
        generation = previous
    served = variant.served_after if not dry_run else None
    return VariantResult(
        variant=variant.target.variant, url=variant.target.url,
        path=_index_url(server, variant.location), generation=generation,
        previous=previous, wheels=len(variant.wheels), added=tuple(added),
        removed=tuple(removed), pruned=pruned, served=served, switched=variant.switched,
        error=variant.error)


def publish(matrix: Matrix, request: PulpRequest,
            make_client: Callable[[PulpServer], Client] = Client) -> IndexResult:
    """Judge every wheel, then (unless a dry run, or a wheel is refused) give each variant
    whose wheels changed one new repository version and, once every one is ready, switch
    the distributions; then read again what each serves."""
    if request.keep < 0:
        raise InputError("cannot keep fewer than 0 older versions", field="keep")
    root = "pulp+" + request.server.base_url
    variants: list[_Variant] = []
    refusals: list[Refusal] = []
    chosen = targets(matrix, request.wheels)
    for target in chosen:
        judged = judge_wheels(target)
        refusals.extend(judged.refusals)
        variants.append(_Variant(target, Location(None, ""), judged.wheels))
    if refusals:
        return IndexResult(root, request.dry_run, refusals=tuple(refusals))
    client, locations = _connect(request.server, [t.url for t in chosen], make_client)
    pruned: dict[int, tuple[int, ...]] = {}
    try:
        for variant, loc in zip(variants, locations):
            variant.location = loc
            _look(client, variant)
        substituted = [refusal for variant in variants for refusal in _substituted(variant)]
        if substituted:
            return IndexResult(root, request.dry_run, refusals=tuple(substituted))
        if request.dry_run:
            return IndexResult(root, True, variants=tuple(
                _result(request.server, v, True) for v in variants))
        todo = [v for v in variants if any(_changes(v)) or not _pinned(v)]
        for variant in todo:
            _prepare(client, variant)
        try:
            _switch_each(client, todo)
        except Interrupted as exc:
            exc.done.append(switched_before_the_stop(
                [v.target.variant for v in todo if v.switched],
                [v.target.variant for v in todo if not v.switched]))
            raise
        for variant in variants:
            try:
                _served_now(client, variant)
                if variant.switched and variant.error is None:
                    pruned[id(variant)] = _prune(client, variant, request.keep)
            except PulpError as exc:
                if exc.exit_code != 1:
                    raise
                variant.error = variant.error or f"reading it again or deleting older " \
                    f"versions failed: {exc}"
    finally:
        client.logout()
    return IndexResult(root, False, variants=tuple(
        _result(request.server, v, False, pruned.get(id(v), ())) for v in variants))


def _substituted(variant: _Variant) -> list[Refusal]:
    """The wheels whose file name the distribution already serves with other bytes (a
    rebuilt wheel republished under its old name): refused, as Pulp refuses them with
    allow_package_substitution off, before anything is uploaded or changed."""
    served = variant.served_content or {}
    return [Refusal(variant.target.variant, str(path),
                    f"{name} is already published with other bytes (sha256 "
                    f"{served[name][0]}, this one {facts.sha256}): a published file never "
                    "changes; give the rebuilt wheel a new version or build tag")
            for name, (path, facts) in sorted(variant.wheels.items())
            if name in served and served[name][0] != facts.sha256]


def _switch_each(client: Client, todo: Sequence[_Variant]) -> None:
    """Every version is ready: now the switches, one after another; after one fails, the
    rest are not switched."""
    failed: Optional[str] = None
    for variant in todo:
        if failed is not None:
            variant.error = f"not switched: {failed}"
            continue
        try:
            _switch(client, variant)
        except PulpError as exc:
            if exc.exit_code != 1:
                raise
            variant.error = f"switching failed: {exc}"
        if variant.error is not None:
            failed = f"{variant.target.variant} {variant.error}"


def rollback(matrix: Matrix, server: PulpServer, variant_names: Sequence[str],
             make_client: Callable[[PulpServer], Client] = Client) -> IndexResult:
    """Point each variant's distribution back at the version it served before the current
    one (the last of its history label). Every variant is checked before any is
    switched."""
    chosen = targets(matrix, {name: () for name in variant_names})
    client, locations = _connect(server, [t.url for t in chosen], make_client)
    try:
        plans = [_rollback_plan(client, target, loc) for target, loc in zip(chosen, locations)]
        results = []
        for target, distribution, served, href, earlier in plans:
            client.run("PATCH", distribution["pulp_href"], {
                "repository": None, "repository_version": href,
                "pulp_labels": _labels(distribution, earlier)})
            results.append(RollbackResult(target.variant, target.url, _number(href),
                                          _number(served)))
    finally:
        client.logout()
    return IndexResult("pulp+" + server.base_url, False, rolled_back=tuple(results))


def _rollback_plan(client: Client, target: IndexTarget, loc: Location
                   ) -> tuple[IndexTarget, dict[str, Any], str, str, list[int]]:
    distribution = _find(client, "distributions/python/pypi/", base_path=loc.base_path)
    if distribution is None or not distribution.get("repository_version"):
        raise PulpError(f"{target.variant}: no distribution at {loc.base_path} serving "
                        "a pinned version: nothing to roll back")
    served = distribution["repository_version"]
    before = history(distribution)
    if not before:
        raise PulpError(f"{target.variant}: no version served before version "
                        f"{_number(served)} is recorded (label {HISTORY_LABEL}): nothing "
                        "to roll back to")
    number = before.pop()
    href = f"{_repository_of_version(served)}versions/{number}/"
    kept = {v["number"] for v in client.all(_repository_of_version(served) + "versions/",
                                            fields="number")}
    if number not in kept:
        raise PulpError(f"{target.variant}: version {number}, served before version "
                        f"{_number(served)}, is gone (older versions than the kept ones are "
                        "deleted): not rolling back to another")
    return target, distribution, served, href, before
