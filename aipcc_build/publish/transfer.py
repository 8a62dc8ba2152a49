"""What promote and mirror share: one image to copy by digest, the events a copy reports,
and bounded retries with capped exponential backoff on errors a later attempt can cure."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional, TypeVar

from ..errors import InputError, ToolError, without_credentials

# What skopeo (containers/image) prints when the network or the registry failed, not the
# request: a connection that broke, or a 5xx answer.
_TRANSIENT = (
    "connection refused",
    "connection reset",
    "broken pipe",
    "i/o timeout",
    "tls handshake timeout",
    "unexpected eof",
    ": eof",
    "no such host",
    "server misbehaving",
    "too many requests",
)


# A 5xx status as containers/image words it: "received unexpected HTTP status: 503 Service
# Unavailable", "invalid status code from registry 503 (Service Unavailable)", "status 502".
_STATUS_5XX = re.compile(r"(status|code)\D{0,40}\b5\d\d\b|\b5\d\d \(?(internal server error|"
                         r"bad gateway|service unavailable|gateway timeout)")


def transient(error: ToolError) -> bool:
    """Whether ERROR is a connection error or a 5xx answer (retried), not a refusal."""
    text = error.stderr.lower()
    return (error.timed_out or any(phrase in text for phrase in _TRANSIENT)
            or _STATUS_5XX.search(text) is not None)


@dataclass(frozen=True)
class Retry:
    """ATTEMPTS tries in all; the wait doubles from FIRST seconds up to CAP."""

    attempts: int = 5
    first: float = 1.0
    cap: float = 16.0

    def delay(self, attempt: int) -> float:
        return float(min(self.cap, self.first * (2 ** (attempt - 1))))


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
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return done + list(pool.map(action, items))


def with_retries(action: Callable[[], T], retry: Retry, on_retry: Callable[[int, float, str],
                 None], sleep: Callable[[float], None] = time.sleep) -> T:
    """ACTION, tried again after a transient ToolError until RETRY's attempts run out (then
    the last error is raised); ON_RETRY(attempt, delay, reason) before each wait."""
    attempt = 1
    while True:
        try:
            return action()
        except ToolError as exc:
            if not transient(exc) or attempt >= retry.attempts:
                raise
            wait = retry.delay(attempt)
            on_retry(attempt, wait, last_line(exc))
            sleep(wait)
            attempt += 1


def last_line(error: ToolError) -> str:
    lines = error.stderr.strip().splitlines()
    return lines[-1] if lines else str(error)


def repository_of(reference: str) -> str:
    """REFERENCE without its tag or digest."""
    repository = reference.split("@", 1)[0]
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]
    return repository


def tag_of(reference: str) -> Optional[str]:
    name = reference.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[1] if ":" in name else None


def below(reference: str, registry: str) -> Optional[str]:
    """The repository path of REFERENCE below REGISTRY, without tag or digest
    ("quay.io/aipcc/base/cuda:3.0-1", "quay.io/aipcc" -> "base/cuda"); None when outside."""
    repository = repository_of(reference)
    prefix = registry.rstrip("/") + "/"
    return repository[len(prefix):] if repository.startswith(prefix) else None


def no_credentials(destination: str, field: str = "to") -> str:
    """DESTINATION, refused (with the password masked) when it holds user:password@: skopeo
    takes none there and echoes the reference in its errors; --authfile holds them."""
    masked = without_credentials(destination)
    if masked != destination:
        raise InputError(f"'{masked}' holds credentials: they would show in logs and errors; "
                         "give them in an auth file (--authfile)", field=field)
    return destination
