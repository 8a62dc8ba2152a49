"""Which failures a later attempt can cure, and how long to wait before it: the one table
of transient errors and the one backoff behind every retry (buildah builds and pushes, skopeo
copies and looks, registry HTTP, the Pulp client, the scheduler).

A failure is transient when the network or the registry failed, not the request: a
connection that broke or timed out, a 5xx answer, or a 429 (too many requests), whose
`Retry-After` is honoured when the answer carries one.
"""

from __future__ import annotations

import time

from ..errors import ToolError
from ..patterns import IGNORECASE, lazy
from ..records import record

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Callable, Optional, TypeVar

    T = TypeVar("T")

# The container runtime failing to start a container (a RUN step's, `buildah run`'s): crun
# and runc copy themselves into a sealed memfd at each start, and the kernel refuses the
# seal (EBUSY) while a page of the copy is briefly pinned, as on a loaded machine; the next
# start seals. The step never ran: unlike a RUN step that failed, worth running again.
_RUNTIME_START = r"sealing memfd copy: device or resource busy"
RUNTIME_START = lazy(_RUNTIME_START, IGNORECASE)
# How containers/image, Go's net stack and Python's sockets and `http1` word a failure of
# the network or of the registry (`NetworkFailure` carries Python's words: "Connection
# refused", "Connection reset by peer", "timed out", http1's "the server closed the
# connection without answering"). A 5xx status as containers/image words it: "received
# unexpected HTTP status: 503 Service Unavailable", "invalid status code from registry 503
# (Service Unavailable)", "status 502". And the runtime's start above.
TRANSIENT = lazy(
    r"connection refused|connection reset|broken pipe|i/o timeout|TLS handshake timeout|"
    r"\btimed out\b|closed the connection without answering|"
    + _RUNTIME_START + r"|"
    r"no such host|temporary failure in name resolution|server misbehaving|"
    r"unexpected EOF|: EOF\b|request canceled|"
    r"\b429\b|too ?many ?requests|"
    r"(status|code)\D{0,40}\b5\d\d\b|"
    r"\b5\d\d \(?(internal server error|bad gateway|service unavailable|gateway timeout)",
    IGNORECASE,
)
# The HTTP answers a later attempt can cure (our own requests: registries, Pulp): too many
# requests, or the server or a proxy in front of it failing.
def transient_status(status: int) -> bool:
    """Whether an HTTP STATUS is transient: 429 or 5xx."""
    return status == 429 or 500 <= status <= 599


# Of those, the answers that say the server did not act on the request: only these let a
# request that is not idempotent (a POST that makes a repository version) be sent again.
NOT_ACTED_STATUS = frozenset({429, 503})

# A Retry-After a registry sent, as an error message carries it ("retry after 3 s" is how
# `TransientAnswer` words it).
_RETRY_AFTER = lazy(r"retry[ -]after:? (\d+(?:\.\d+)?)", IGNORECASE)
# The longest Retry-After obeyed: a registry asking for more is retried after this long.
MAX_RETRY_AFTER = 300.0


# containers/storage shared with other processes (a CI runner's other jobs): a listing that
# raced with one of them removing what it listed fails ("reading build containers: container
# not known"); the next listing is whole.
STORAGE_RACE = lazy(r"\b(?:container|image|layer) not known\b", IGNORECASE)


def storage_race(error: ToolError) -> bool:
    """Whether ERROR is a listing of local storage that lost a race with another process."""
    return STORAGE_RACE.search(error.stderr) is not None


def runtime_start_failed(text: str) -> bool:
    """Whether TEXT (buildah's output) says the runtime could not start a container: a RUN
    step that failed so never ran."""
    return RUNTIME_START.search(text) is not None


def transient_text(text: str) -> bool:
    """Whether TEXT (an outside program's stderr, an HTTP error) names a transient failure."""
    return TRANSIENT.search(text) is not None


def transient(error: ToolError) -> bool:
    """Whether ERROR is a timeout, a connection error, a 5xx or a 429 (retried), not a
    refusal."""
    return error.timed_out or transient_text(error.stderr)


def retry_after(text: str) -> Optional[float]:
    """The seconds a registry asked to wait, when TEXT carries its Retry-After."""
    match = _RETRY_AFTER.search(text)
    return float(match.group(1)) if match else None


def parse_retry_after(header: Optional[str]) -> Optional[float]:
    """A Retry-After header's seconds (its HTTP-date form counts from now); None when
    absent or unreadable."""
    if not header:
        return None
    header = header.strip()
    if header.isascii() and header.isdigit():  # not "²", which `float` refuses
        return float(header)
    from email.utils import parsedate_to_datetime  # here: only a 429 with a date needs it

    try:
        when = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class StillFailing(ToolError):
    """A transient failure that outlasted every attempt: the registry or the network failed,
    not the request, so it ends the command like a failed build (exit 1), not as refused
    input (exit 2)."""

    exit_code = 1


class TransientAnswer(ToolError):
    """A registry answered 429 or 5xx to one of our own HTTP requests (no outside program
    ran): transient like a skopeo that saw the same answer, with the Retry-After it sent."""

    def __init__(self, url: str, status: int, reason: str,
                 wait: Optional[float] = None) -> None:
        after = f" (retry after {wait:g} s)" if wait is not None else ""
        super().__init__(["http", url], 1,
                         f"{url}: status {status}{' ' + reason if reason else ''}{after}")


class NetworkFailure(ToolError):
    """The network failed one of our own HTTP requests, one that may be sent again (the
    connection refused, reset or closed unanswered, or a timeout): transient when the
    table says so of WHY, like a skopeo that saw the same. URL is named without its query
    and with no credential."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(["http", url], 1, f"{url}: {why}")


def raise_if_network_failed(url: str, why: str, said: str = "") -> None:
    """NetworkFailure of URL when WHY (how the network failed one of our own HTTP requests,
    one that may be sent again) is transient by the table, its message SAID followed by
    WHY; nothing otherwise: the caller refuses in its own words."""
    if transient_text(why):
        raise NetworkFailure(url, said + why) from None


# Tries of a copy or a request in all, unless a command's --retries says otherwise.
DEFAULT_ATTEMPTS = 5


@record
class Retry:
    """ATTEMPTS tries in all; the wait doubles from FIRST seconds up to CAP, and is at
    least what the registry asked for (Retry-After, up to MAX_RETRY_AFTER)."""

    attempts: int = DEFAULT_ATTEMPTS
    first: float = 1.0
    cap: float = 16.0

    def delay(self, attempt: int, asked: Optional[float] = None) -> float:
        """The wait after failed attempt number ATTEMPT (from 1)."""
        backoff = float(min(self.cap, self.first * (2 ** (attempt - 1))))
        return backoff if asked is None else max(backoff, min(asked, MAX_RETRY_AFTER))




def with_retries(action: Callable[[], T], retry: Retry, on_retry: Callable[[int, float, str],
                 None], sleep: Callable[[float], None] = time.sleep,
                 cured_by_retry: Callable[[ToolError], bool] = transient) -> T:
    """ACTION, tried again after a transient ToolError (CURED_BY_RETRY says which) until
    RETRY's attempts run out (then StillFailing with the last error); ON_RETRY(attempt,
    delay, reason) before each wait."""
    attempt = 1
    while True:
        try:
            return action()
        except ToolError as exc:
            if not cured_by_retry(exc):
                raise
            if attempt >= retry.attempts:
                raise StillFailing(exc.command, exc.returncode, exc.stderr,
                                   exc.timed_out) from exc
            wait = retry.delay(attempt, retry_after(exc.stderr))
            on_retry(attempt, wait, last_line(exc))
            sleep(wait)
            attempt += 1


def last_line(error: ToolError) -> str:
    lines = error.stderr.strip().splitlines()
    return lines[-1] if lines else str(error)
