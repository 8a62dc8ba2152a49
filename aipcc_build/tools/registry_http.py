"""The one HTTP client for registries (the Docker Registry HTTP API v2), where a process
per question would cost more than the answer: `get`, one GET on a host over TLS (or, only
when TLS verification is off, over plain HTTP where the host speaks no TLS), used by the
build's registry check and by `manifest_digest`.

`manifest_digest` is a fast, anonymous look at a tag's digest: one GET of its manifest
instead of a skopeo process, so that a rerun with nothing to copy costs little. The digest
is the sha256 of the manifest bytes received, never the registry's `Docker-Content-Digest`
header alone: a registry or proxy that sends the header for other content cannot make
promote or mirror skip a copy. It sends no credentials: when the registry asks for them
(401/403), or answers anything unexpected, it returns UNKNOWN and the caller asks skopeo,
which reads the auth files. A 429 or 5xx answer raises `TransientAnswer` (with the
registry's Retry-After), and the network failing the GET (refused, reset, closed unanswered,
timed out) `NetworkFailure`, as `oci_registry` does: the caller retries either through
`tools.retry`'s `with_retries`, like any registry call."""

from __future__ import annotations

from ..digest import hexdigest
from ..functional import cache
from ..image_reference import is_reference, split
from ..oci import DOCKER_MANIFEST, DOCKER_MANIFEST_LIST, OCI_INDEX, OCI_MANIFEST
from ..records import record
from . import http1
from .retry import (
    TransientAnswer,
    parse_retry_after,
    raise_if_network_failed,
    transient_status,
)

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    import ssl
    from collections.abc import Mapping
    from typing import Optional, Union

UNKNOWN = object()  # ask skopeo
ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_MANIFEST_LIST, DOCKER_MANIFEST))
TIMEOUT = 10.0
# The largest manifest read (distribution refuses to store one above 4 MiB): a longer
# answer is not a manifest, and only skopeo can tell.
MAX_MANIFEST = 4 * 1024 * 1024


# Hosts that answered on plain HTTP (only ever tried with TLS verification off).
_PLAIN: dict[str, list[str]] = {}


@cache  # one context of each kind (verified or not)
def _context(verify: bool) -> ssl.SSLContext:
    # Loading the CA bundle takes tens of milliseconds: once per run, not once per image.
    # `ssl` is loaded here, by the first request over TLS: a run that reaches its
    # registries over plain HTTP only never loads it (a tenth of a `verify` of one image).
    import ssl

    if verify:
        return ssl.create_default_context()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA bundle: nothing is verified
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def manifest_digest(ref: str, tls_verify: bool = True) -> Union[Optional[str], object]:
    """The digest REF (docker://HOST/REPO:TAG) points at, None when the tag does not exist,
    UNKNOWN when only skopeo can tell."""
    if not ref.startswith("docker://") or not is_reference(ref[len("docker://"):]):
        return UNKNOWN  # a line break or a space would not go into a request line as it is
    repository, tag, digest = split(ref[len("docker://"):])
    # The first component names a registry host when it holds a dot or a port, or is
    # localhost (the rule docker and containers/image follow).
    host, _, path = repository.partition("/")
    if not path or not tag or digest \
            or "." not in host and ":" not in host and host != "localhost":
        return UNKNOWN
    try:
        answer = get(host, f"/v2/{path}/manifests/{tag}", tls_verify, TIMEOUT,
                     {"Accept": ACCEPT}, max_body=MAX_MANIFEST + 1)
    except Unreachable:
        return UNKNOWN
    if answer.status == 200 and len(answer.body) <= MAX_MANIFEST:
        return f"sha256:{hexdigest('sha256', answer.body)}"
    if answer.status == 404:
        return None
    if transient_status(answer.status):
        raise TransientAnswer(answer.url, answer.status, answer.reason,
                              parse_retry_after(answer.headers.get("retry-after")))
    return UNKNOWN


class Unreachable(Exception):
    """No answer from a host on any scheme tried; the message says why."""


class PlainHTTP(Unreachable):
    """The host answered the TLS handshake in plain HTTP: a registry without TLS, asked
    with TLS verification on (OpenSSL says only WRONG_VERSION_NUMBER)."""


def _tls_failed(exc: OSError) -> bool:
    """Whether EXC is a TLS error (`ssl` is loaded: a connection over TLS raised it)."""
    import ssl

    return isinstance(exc, ssl.SSLError)


def _speaks_plain_http(host: str, timeout: float) -> bool:
    """Whether HOST answers a plain-HTTP request (any status): asked only after its TLS
    handshake failed, to say why."""
    conn = http1.Connection(host, min(timeout, 5.0))
    try:
        conn.request("GET", "/v2/", b"", {}, 0)
        return True
    except OSError:
        return False
    finally:
        conn.close()


@record
class Answer:
    url: str
    status: int
    reason: str
    headers: Mapping[str, str]  # names in lower case
    body: bytes  # at most the max_body asked for; only a 200's


def get_url(url: str, timeout: float) -> Answer:
    """GET URL as written (http or https, TLS verified): a wheel index's page, where the
    matrix says which scheme. Unreachable when it does not answer."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Unreachable(f"not an http or https URL: {parts.scheme or '?'}://")
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return get(host, target, True, timeout, schemes=[parts.scheme])


def get(host: str, target: str, tls_verify: bool, timeout: float,
        headers: Optional[Mapping[str, str]] = None, max_body: int = 65536,
        schemes: Optional[list[str]] = None) -> Answer:
    """GET TARGET on HOST (host[:port]) within TIMEOUT seconds per attempt; Unreachable
    when no scheme answers, NetworkFailure (retried by the caller, through
    `tools.retry.with_retries`) when the last scheme tried failed as the table of transient
    errors says a later attempt may cure. SCHEMES: only these (default: https, and plain
    http too when TLS verification is off)."""
    why = scheme = ""
    if schemes is None:
        schemes = ["https"] if tls_verify else _PLAIN.get(host, ["https", "http"])
    for scheme in schemes:
        conn = http1.Connection(host, timeout,
                                _context(tls_verify) if scheme == "https" else None)
        try:
            response = conn.request("GET", target, b"", dict(headers or {}), max_body)
            answer = Answer(f"{scheme}://{host}{target}", response.status, response.reason,
                            dict(response.headers),
                            response.body[:max_body] if response.status == 200 else b"")
        except OSError as exc:  # ssl.SSLError and http1.BadAnswer among them
            why = str(exc) or type(exc).__name__
            if scheme == "https" and "http" not in schemes and _tls_failed(exc) \
                    and _speaks_plain_http(host, timeout):
                raise PlainHTTP(f"{host} speaks plain HTTP, not HTTPS") from None
            continue  # no TLS there (try plain HTTP when allowed), or unreachable
        finally:
            conn.close()
        if scheme == "http" and not tls_verify:
            _PLAIN[host] = ["http"]  # the next look at this host skips the TLS attempt
        return answer
    raise_if_network_failed(named(scheme, host, target), why)
    raise Unreachable(why)


def named(scheme: str, host: str, target: str) -> str:
    """The URL of TARGET on HOST as messages name it: without its query, which holds a
    signed URL's signature or an upload's state."""
    return f"{scheme}://{host}{target.split('?', 1)[0]}"
