"""What promote and mirror share: one image to copy by digest, the events a copy reports,
and running copies side by side. Their retries are `tools.retry`'s."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional, TypeVar

from ..errors import InputError, quoted, without_credentials
from ..tools.retry import Retry
from ..tools.skopeo import Skopeo


@dataclass(frozen=True)
class Copy:
    """One image to copy: SOURCE (by digest) to DEST (by tag); KEY names it in events."""

    key: str
    source: str
    dest: str
    digest: str


@dataclass(frozen=True)
class Event:
    """Progress of one image: planned, skipped (already there), copying, retry, copied,
    failed. MESSAGE says why for retry and failed."""

    key: str
    kind: str
    dest: str = ""
    message: str = ""
    index: int = 0
    total: int = 0


OnEvent = Callable[[Event], None]
T = TypeVar("T")
R = TypeVar("R")

# A quick look at a registry tag's digest, (docker://REF, tls_verify) -> digest, None (no
# such tag) or registry_http.UNKNOWN (ask skopeo): registry_http.manifest_digest.
Probe = Callable[[str, bool], object]


def each(action: Callable[[T], R], items: Sequence[T], jobs: int, *,
         first_alone: bool = False) -> list[R]:
    """ACTION on every item, JOBS at once, results in order (the first exception raised
    after every item ran). FIRST_ALONE: the first runs before the others start, so that
    what it sets up (a registry's scheme learnt, a TLS context) serves them all."""
    done: list[R] = []
    if first_alone and items:
        done, items = [action(items[0])], items[1:]
    if jobs <= 1 or len(items) <= 1:
        return done + [action(item) for item in items]
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        return done + list(pool.map(action, items))
    except Exception:
        pool.shutdown(wait=True)  # the others still run
        raise
    finally:
        # A signal (Interrupted): the items not yet started never start.
        pool.shutdown(wait=True, cancel_futures=True)


def no_credentials(destination: str, field: str = "to") -> str:
    """DESTINATION, refused (with the password masked) when it holds user:password@: skopeo
    takes none there and echoes the reference in its errors; --authfile holds them."""
    masked = without_credentials(destination)
    if masked != destination:
        raise InputError(f"{quoted(masked, always=True)} holds credentials: they would "
                         "show in logs and errors; give them in an auth file (--authfile)",
                         field=field)
    return destination


# Transports that name no registry: a --to starting with one is not HOST/NAMESPACE.
_OTHER_TRANSPORTS = ("oci:", "oci-archive:", "dir:", "docker-archive:", "containers-storage:")


def release_namespace(to: str, field: str = "to") -> str:
    """HOST/NAMESPACE of a --to written HOST/NAMESPACE or docker://HOST/NAMESPACE (skopeo's
    spelling), without a trailing '/'; InputError on anything else."""
    no_credentials(to, field)
    bare = to[len("docker://"):] if to.startswith("docker://") else to
    bare = bare.rstrip("/")
    host, slash, _ = bare.partition("/")
    if to.startswith(_OTHER_TRANSPORTS) or "://" in bare or not host or (
            not slash and ":" not in host and host != "localhost") or not to.isprintable():
        raise InputError(f"{quoted(to, always=True)} is not HOST/NAMESPACE or docker://HOST/NAMESPACE",
                         field=field)
    return bare


# Checks that every registry of REFERENCES answers (TLS_VERIFY, AUTHFILE) before any look,
# asking again while the network fails it within the command's RETRY bound.
RegistryCheck = Callable[[Sequence[str], bool, Optional[str], Retry], None]


def registries_answer(references: Sequence[str], tls_verify: bool,
                      authfile: Optional[str], retry: Retry) -> None:
    """The build's registry check (`GET /v2/` within seconds, the auth file's login), for a
    copy: a registry that is down fails now, not after every retry of every look. Its GETs
    are retried within RETRY (the command's --retries), as the build's are."""
    import os

    from ..errors import CheckFailed
    from ..imagebuild.preflight import check_registries

    environ = dict(os.environ, REGISTRY_AUTH_FILE=authfile) if authfile else os.environ
    try:
        check_registries(references, tls_verify, environ, retry=retry)
    except CheckFailed as exc:
        # About --to as much as the source registry: only the TLS switch is named.
        raise CheckFailed(str(exc),
                          field="tls_verify" if exc.field == "tls_verify" else None) from None


@dataclass(frozen=True)
class Served:
    """What a destination tag was found to serve after the copy: PROBLEM is "" when the
    tag and the digest both serve the manifest sent, else says what it serves instead.
    PLATFORMS: the image's, as the destination serves them (os/arch[/variant])."""

    dest: str  # HOST/REPO:TAG
    digest: str  # what was sent
    problem: str
    platforms: tuple[str, ...] = ()
    manifest: bytes = b""  # REPO@DIGEST's bytes as read back (hashed), when they were


def read_back(pairs: Sequence[tuple[str, str]], skopeo: Skopeo, *, tls_verify: bool,
              authfile: Optional[str], retry: Retry, jobs: int,
              probe: Optional[Probe] = None, sleep: Optional[Callable[[float], None]] = None,
              looked: Optional[dict[str, Optional[str]]] = None,
              platforms: Optional[dict[str, tuple[str, ...]]] = None,
              with_platforms: bool = True) -> list[Served]:
    """Each (HOST/REPO:TAG, DIGEST) copied, read back from the registry: the tag must
    point at DIGEST, and REPO@DIGEST must serve bytes whose sha256 is DIGEST (a registry
    that answered 201 to a write it did not keep, or keeps it under another name, is
    found here, not by the site that pulls). One manifest read per image, one look per
    tag but those LOOKED at already in this run (tag -> digest), after any copy to it.
    The platforms of an index are its own; of a single manifest, PLATFORMS[digest] when the
    build recorded them (the digest names the bytes), else its configuration's (none read
    without WITH_PLATFORMS)."""
    import hashlib

    from ..image_reference import repository_of
    from ..oci import load_json
    from ..tools.registry_http import UNKNOWN
    from ..tools.retry import with_retries

    pause = time.sleep if sleep is None else sleep

    def by_digest(image: tuple[str, str]) -> tuple[str, tuple[str, ...], bytes]:
        ref = f"docker://{image[0]}@{image[1]}"
        raw = with_retries(lambda: skopeo.manifest(ref, tls_verify=tls_verify,
                                                   authfile=authfile), retry, _quiet, pause)
        if raw is None:
            return f"{image[0]}@{image[1]} is not served", (), b""
        if "sha256:" + hashlib.sha256(raw).hexdigest() != image[1]:
            return f"{image[0]}@{image[1]} serves other bytes", (), b""
        try:
            manifest = load_json(raw)
        except ValueError:
            return f"{image[0]}@{image[1]} is not a manifest", (), b""
        listed = manifest.get("manifests") if isinstance(manifest, dict) else None
        if isinstance(listed, list):
            return "", tuple(dict.fromkeys(
                _platform(m.get("platform")) for m in listed
                if isinstance(m, dict) and _platform(m.get("platform")))), raw
        if not with_platforms:
            return "", (), raw
        if (platforms or {}).get(image[1]):
            return "", (platforms or {})[image[1]], raw
        config = with_retries(lambda: skopeo.config_of(ref, tls_verify=tls_verify,
                                                       authfile=authfile), retry, _quiet, pause)
        found = _platform(config)
        return "", (found,) if found else (), raw

    def by_tag(dest: str) -> Optional[str]:
        ref = f"docker://{dest}"
        quick = with_retries(lambda: probe(ref, tls_verify), retry, _quiet, pause) \
            if probe else UNKNOWN
        if quick is not UNKNOWN:
            return quick if isinstance(quick, str) else None
        return with_retries(lambda: skopeo.manifest_digest(ref, tls_verify=tls_verify,
                                                           authfile=authfile),
                            retry, _quiet, pause)

    images = list(dict.fromkeys((repository_of(dest), digest) for dest, digest in pairs))
    found = dict(zip(images, each(by_digest, images, jobs)))
    known = looked or {}
    tags = each(lambda dest: known[dest] if dest in known else by_tag(dest),
                [dest for dest, _ in pairs], jobs)
    served = []
    for (dest, digest), now in zip(pairs, tags):
        problem, served_platforms, raw = found[(repository_of(dest), digest)]
        if now != digest:
            problem = (f"{dest} serves {now or 'nothing'}, not the {digest} sent"
                       + (f"; {problem}" if problem else ""))
        served.append(Served(dest, digest, problem, served_platforms, raw))
    return served


def _quiet(attempt: int, wait: float, why: str) -> None:
    """A read-back's retries are not reported: the copy's were."""


def _platform(value: object) -> str:
    """os/architecture[/variant] of a manifest list's platform or an image config."""
    if not isinstance(value, dict) or not value.get("os") or not value.get("architecture"):
        return ""
    return "/".join(str(value[k]) for k in ("os", "architecture", "variant") if value.get(k))
