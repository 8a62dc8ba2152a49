"""What promote and mirror share: one image to copy by digest, the events a copy reports,
and running copies side by side. Their retries are `tools.retry`'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional, TypeVar

from ..errors import InputError, without_credentials


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
        raise InputError(f"'{masked}' holds credentials: they would show in logs and errors; "
                         "give them in an auth file (--authfile)", field=field)
    return destination


# Checks that every registry of REFERENCES answers (TLS_VERIFY, AUTHFILE) before any look.
RegistryCheck = Callable[[Sequence[str], bool, Optional[str]], None]


def registries_answer(references: Sequence[str], tls_verify: bool,
                      authfile: Optional[str]) -> None:
    """The build's registry check (`GET /v2/` within seconds, the auth file's login), for a
    copy: a registry that is down fails now, not after every retry of every look."""
    import os

    from ..errors import CheckFailed
    from ..imagebuild.preflight import check_registries

    environ = dict(os.environ, REGISTRY_AUTH_FILE=authfile) if authfile else os.environ
    try:
        check_registries(references, tls_verify, environ)
    except CheckFailed as exc:
        raise CheckFailed(str(exc)) from None  # about --to as much as the source registry
