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

`rollback` points a distribution back at the newest version older than the one it serves.
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

from ..errors import InputError
from ..matrix import Matrix
from .pulp_api import Client, PulpError
from .pulp_config import PulpServer
from .static_tree import (
    DEFAULT_KEEP,
    IndexResult,
    IndexTarget,
    Refusal,
    VariantResult,
    judge,
    targets,
)
from .wheel_file import WheelFacts

UPLOAD_JOBS = 4  # wheels uploaded at once
_LOOKUP_BATCH = 40  # sha256 values per content query: a request line under 4 KiB (gunicorn)
_FIELDS = "pulp_href,sha256,filename"


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


@dataclass(frozen=True)
class RollbackResult:
    variant: str
    url: str
    version: int  # served now
    previous: int  # served before


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
        with ThreadPoolExecutor(max_workers=UPLOAD_JOBS) as pool:
            done = {sha: pool.submit(client.upload, path, name)
                    for sha, (path, name) in uploads.items()}
            for sha, future in done.items():
                hrefs[sha] = future.result()
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
                "name": base_path, "description": f"aipcc-build index: {variant.target.url}"}))
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


def _switch(client: Client, variant: _Variant) -> None:
    assert variant.ready is not None
    if variant.distribution is None:
        client.run("POST", "distributions/python/pypi/", {
            "name": variant.location.base_path, "base_path": variant.location.base_path,
            "repository_version": variant.ready})
    else:
        client.run("PATCH", variant.distribution["pulp_href"], {
            "repository": None, "repository_version": variant.ready})


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
    return VariantResult(
        variant=variant.target.variant, url=variant.target.url,
        path=_index_url(server, variant.location), generation=generation,
        previous=previous, wheels=len(variant.wheels), added=tuple(added),
        removed=tuple(removed), pruned=pruned)


def publish(matrix: Matrix, request: PulpRequest,
            make_client: Callable[[PulpServer], Client] = Client) -> IndexResult:
    """Judge every wheel, then (unless a dry run, or a wheel is refused) give each variant
    whose wheels changed one new repository version and switch the distributions."""
    if request.keep < 0:
        raise InputError("cannot keep fewer than 0 older versions", field="keep")
    root = "pulp+" + request.server.base_url
    variants: list[_Variant] = []
    refusals: list[Refusal] = []
    chosen = targets(matrix, request.wheels)
    for target in chosen:
        wheels, refused = judge(target)
        refusals.extend(refused)
        variants.append(_Variant(target, Location(None, ""), wheels))
    if refusals:
        return IndexResult(root, request.dry_run, refusals=tuple(refusals))
    client, locations = _connect(request.server, [t.url for t in chosen], make_client)
    try:
        for variant, loc in zip(variants, locations):
            variant.location = loc
            _look(client, variant)
        if request.dry_run:
            return IndexResult(root, True, variants=tuple(
                _result(request.server, v, True) for v in variants))
        todo = [v for v in variants if any(_changes(v)) or not _pinned(v)]
        for variant in todo:
            _prepare(client, variant)
        for variant in todo:  # every version is ready: now the switches, one after another
            _switch(client, variant)
        pruned = {id(v): _prune(client, v, request.keep) for v in todo}
    finally:
        client.logout()
    return IndexResult(root, False, variants=tuple(
        _result(request.server, v, False, pruned.get(id(v), ())) for v in variants))


def rollback(matrix: Matrix, server: PulpServer, variant_names: Sequence[str],
             make_client: Callable[[PulpServer], Client] = Client) -> list[RollbackResult]:
    """Point each variant's distribution back at the newest version older than the one it
    serves. Every variant is checked before any is switched."""
    chosen = targets(matrix, {name: () for name in variant_names})
    client, locations = _connect(server, [t.url for t in chosen], make_client)
    try:
        plans = [_rollback_plan(client, target, loc) for target, loc in zip(chosen, locations)]
        results = []
        for target, distribution, served, (number, href) in plans:
            client.run("PATCH", distribution["pulp_href"],
                       {"repository": None, "repository_version": href})
            results.append(RollbackResult(target.variant, target.url, number,
                                          _number(served)))
    finally:
        client.logout()
    return results


def _rollback_plan(client: Client, target: IndexTarget, loc: Location
                   ) -> tuple[IndexTarget, dict[str, Any], str, tuple[int, str]]:
    distribution = _find(client, "distributions/python/pypi/", base_path=loc.base_path)
    if distribution is None or not distribution.get("repository_version"):
        raise PulpError(f"{target.variant}: no distribution at {loc.base_path} serving "
                        "a pinned version: nothing to roll back")
    served = distribution["repository_version"]
    versions = client.all(_repository_of_version(served) + "versions/",
                          fields="number,pulp_href")
    older = sorted((v["number"], v["pulp_href"]) for v in versions
                   if 0 < v["number"] < _number(served))
    if not older:
        raise PulpError(f"{target.variant}: version {_number(served)} is the oldest "
                        "kept: nothing to roll back to")
    return target, distribution, served, older[-1]
