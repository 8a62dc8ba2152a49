"""A fast, anonymous look at a registry tag's digest: one HTTP GET of its manifest instead
of a skopeo process, so that a rerun with nothing to copy costs little. The digest is the
sha256 of the manifest bytes received, never the registry's `Docker-Content-Digest` header
alone: a registry or proxy that sends the header for other content cannot make promote or
mirror skip a copy. It sends no
credentials: when the registry asks for them (401/403), or answers anything unexpected, it
returns UNKNOWN and the caller asks skopeo, which reads the auth files. A 429 or 5xx
answer raises `TransientAnswer` (with the registry's Retry-After): the caller retries it
like any registry call."""

from __future__ import annotations

import functools
import hashlib
import http.client
import ssl
from typing import Optional, Union

from ..image_reference import split
from ..tools.retry import TransientAnswer, parse_retry_after

UNKNOWN = object()  # ask skopeo
ACCEPT = ", ".join((
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
))
TIMEOUT = 10.0
# The largest manifest read (distribution refuses to store one above 4 MiB): a longer
# answer is not a manifest, and only skopeo can tell.
MAX_MANIFEST = 4 * 1024 * 1024


# Hosts that answered on plain HTTP (only ever tried with TLS verification off).
_PLAIN: dict[str, list[str]] = {}


@functools.lru_cache(maxsize=2)
def _context(verify: bool) -> ssl.SSLContext:
    # Loading the CA bundle takes tens of milliseconds: once per run, not once per image.
    if verify:
        return ssl.create_default_context()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA bundle: nothing is verified
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def manifest_digest(ref: str, tls_verify: bool = True) -> Union[Optional[str], object]:
    """The digest REF (docker://HOST/REPO:TAG) points at, None when the tag does not exist,
    UNKNOWN when only skopeo can tell."""
    if not ref.startswith("docker://"):
        return UNKNOWN
    repository, tag, digest = split(ref[len("docker://"):])
    # The first component names a registry host when it holds a dot or a port, or is
    # localhost (the rule docker and containers/image follow).
    host, _, path = repository.partition("/")
    if not path or not tag or digest \
            or "." not in host and ":" not in host and host != "localhost":
        return UNKNOWN
    schemes = ["https"] if tls_verify else _PLAIN.get(host, ["https", "http"])
    for scheme in schemes:
        try:
            if scheme == "https":
                conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                    host, timeout=TIMEOUT, context=_context(tls_verify))
            else:
                conn = http.client.HTTPConnection(host, timeout=TIMEOUT)
            try:
                conn.request("GET", f"/v2/{path}/manifests/{tag}",
                             headers={"Accept": ACCEPT})
                answer = conn.getresponse()
                status = answer.status
                wait = parse_retry_after(answer.getheader("Retry-After"))
                reason = answer.reason
                body = answer.read(MAX_MANIFEST + 1) if status == 200 else b""
            finally:
                conn.close()
        except (OSError, http.client.HTTPException):
            continue  # no TLS there (try plain HTTP when allowed), or unreachable
        if scheme == "http":
            _PLAIN[host] = ["http"]  # the next look at this host skips the TLS attempt
        if status == 200 and len(body) <= MAX_MANIFEST:
            return "sha256:" + hashlib.sha256(body).hexdigest()
        if status == 404:
            return None
        if status == 429 or status >= 500:
            raise TransientAnswer(f"{scheme}://{host}/v2/{path}/manifests/{tag}",
                                  status, reason, wait)
        return UNKNOWN
    return UNKNOWN
