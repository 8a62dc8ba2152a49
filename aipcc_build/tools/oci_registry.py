"""A registry client that writes (Docker Registry HTTP API v2 and OCI distribution 1.1):
what signing and attesting a release need and skopeo cannot do (Debian 12's skopeo has
sigstore disabled; no skopeo writes OCI 1.1 referrers). Manifests and blobs read and
written by digest, the referrers of a digest read through the referrers API where the
registry has one. Credentials come from the containers auth file (the one skopeo reads):
HTTP Basic, or a bearer token from the realm a registry names. Every request has a
timeout; a 429 or 5xx raises `TransientAnswer` for `tools.retry`, as does the network
failing a request that may be sent again (`NetworkFailure`: refused, reset, closed
unanswered, timed out; a kept connection the server closed is first replaced at once),
any other refusal `RegistryRefused`, which names the URL and never a credential."""

from __future__ import annotations

import _thread
import os

from ..digest import hexdigest, is_lower_hex
from ..errors import CheckFailed, InputError
from ..functional import partial, suppress
from ..oci import DOCKER_MANIFEST, DOCKER_MANIFEST_LIST, OCI_INDEX, OCI_MANIFEST, load_json
from ..patterns import lazy
from ..records import record
from . import http1
from .registry_http import _PLAIN, MAX_MANIFEST, TIMEOUT, _context, named
from .retry import (
    TransientAnswer,
    parse_retry_after,
    raise_if_network_failed,
    transient_status,
)

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    import threading
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any, Callable, Optional, TypeVar

    T = TypeVar("T")

ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_MANIFEST_LIST, DOCKER_MANIFEST))
MAX_BLOB = 16 * 1024 * 1024  # signatures, SBOMs and attestations are small
MAX_AUTH_FILE = 4 * 1024 * 1024  # a login per registry: a few hundred bytes each
MAX_BASE = 4096  # the API base's answer (`{}`)
_CHALLENGE_PARAM = lazy(r'(\w+)="([^"]*)"')
# What a tag (the distribution grammar: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}) is made of,
# checked without compiling a pattern.
_TAG_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_TAG_REST = _TAG_FIRST | frozenset(".-")


class RegistryRefused(CheckFailed):
    """The registry answered a request with a refusal (exit 1: the registry, not the input)."""


@record
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


def _auth_files() -> list[Path]:
    """Where containers/image looks for credentials, in its order."""
    from pathlib import Path

    found = []
    if os.environ.get("REGISTRY_AUTH_FILE"):
        found.append(Path(os.environ["REGISTRY_AUTH_FILE"]))
    if os.environ.get("XDG_RUNTIME_DIR"):
        found.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "containers" / "auth.json")
    home = Path.home()
    found += [home / ".config" / "containers" / "auth.json", home / ".docker" / "config.json"]
    return found


def credentials(host: str, authfile: Optional[str]) -> Optional[str]:
    """The base64 user:password an auth file holds for HOST (AUTHFILE, else the default
    files); None when none does."""
    from pathlib import Path

    for path in [Path(authfile)] if authfile else _auth_files():
        try:
            data = read_auth_file(path)
        except FileNotFoundError:
            if authfile:
                raise InputError("no such auth file", file=authfile, field="authfile") from None
            continue
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise InputError(f"not a readable auth file: {why}", file=str(path),
                             field="authfile") from None
        entry = (data.get("auths") or {}).get(host) if isinstance(data, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("auth"), str):
            return header_login(entry["auth"], host, str(path))
    return None


def read_auth_file(path: Path) -> Any:
    """PATH's JSON: a regular file of at most MAX_AUTH_FILE bytes, never read through a
    FIFO (the read would wait for a writer for ever) or a device (/dev/zero: for ever,
    into memory); OSError or ValueError otherwise."""
    from ..fsutil import open_regular

    with open_regular(path) as handle:
        data = handle.read(MAX_AUTH_FILE + 1)
    if len(data) > MAX_AUTH_FILE:
        raise ValueError(f"larger than {MAX_AUTH_FILE} bytes")
    return load_json(data)


def header_login(login: str, host: str, path: str) -> str:
    """LOGIN, an auth file's (PATH) entry for HOST, as it goes into an Authorization
    header; InputError, naming the file and never the login, when a line break or any
    other control character would make it no header (or a second one)."""
    if not (login.isascii() and login.isprintable()):
        raise InputError(f"the login for {host} is not base64 user:password", file=path,
                         field="authfile")
    return login


class Registry:
    """One registry HOST[:PORT]: plain HTTP only when TLS verification is off and it speaks
    no TLS (as skopeo does). A plain class, not a dataclass: `verify` of one image loads
    no `dataclasses` (with `inspect`, a sixth of what it ran)."""

    def __init__(self, host: str, tls_verify: bool = True,
                 authfile: Optional[str] = None) -> None:
        self.host = host
        self.tls_verify = tls_verify
        self.authfile = authfile
        self._scheme: Optional[str] = None
        self._basic: Optional[str] = None
        self._tokens: dict[str, str] = {}  # scope -> bearer token
        # Whether the registry has the referrers API (None: not asked yet): a 404 says it
        # has none for any repository, so the question is asked once.
        self._referrers_api: Optional[bool] = None
        # Idle open connections ((scheme, host) -> connections), kept alive between
        # requests and shared by the threads: a run's dozens of small requests to one
        # registry share a few connections, and a thread started for requests side by
        # side takes one that an earlier request left rather than connecting (and shaking
        # hands) again.
        self._idle: dict[tuple[str, str], list[http1.Connection]] = {}
        self._idle_lock = _thread.allocate_lock()
        # Blobs known to be in a repository (repository, digest): written or found in
        # this run.
        self._blobs: set[tuple[str, str]] = set()
        # Blobs being uploaded now, by a thread the others wait for: distribution 2.8
        # rewrites a repository's link to a blob in place at each upload, and a manifest
        # naming that blob, put meanwhile by another thread, read the half-written link
        # and was refused (DIGEST_INVALID: the two platforms of one image share the empty
        # config blob).
        self._uploading: dict[tuple[str, str], threading.Event] = {}
        self._blob_lock = _thread.allocate_lock()
        # Upload sessions opened ahead and not used yet (repository -> their locations).
        self._opened: dict[str, list[str]] = {}
        # Whether the registry answered a cross-repository mount with anything but the
        # blob mounted (it is then not asked again).
        self._no_mount = False
        # The first upload of each digest in this run (its end, as `_uploading` holds it).
        self._first_upload: dict[str, threading.Event] = {}

    def __repr__(self) -> str:  # never the credentials
        return f"Registry({self.host!r}, tls_verify={self.tls_verify})"

    def request(self, method: str, target: str, body: bytes = b"",
                headers: Optional[dict[str, str]] = None, scope: str = "",
                max_body: int = MAX_BLOB) -> Reply:
        """METHOD TARGET; authenticated once when the registry asks (401)."""
        sent = dict(headers or {})
        reply = self._send(method, target, body, sent, scope, max_body)
        if reply.status == 401:
            self._authenticate(reply.headers.get("www-authenticate", ""), scope)
            reply = self._send(method, target, body, sent, scope, max_body)
        if transient_status(reply.status):
            raise TransientAnswer(self._url(target), reply.status, "",
                                  parse_retry_after(reply.headers.get("retry-after")))
        return reply

    def _url(self, target: str) -> str:
        return named(self._scheme or "https", self.host, target)

    def _send(self, method: str, target: str, body: bytes, headers: dict[str, str],
              scope: str, max_body: int) -> Reply:
        headers = dict(headers)
        if scope in self._tokens:
            headers["Authorization"] = f"Bearer {self._tokens[scope]}"
        elif self._basic:
            headers["Authorization"] = f"Basic {self._basic}"
        why = ""
        for scheme in [self._scheme] if self._scheme else self._schemes():
            try:
                return self._exchange(scheme, self.host, method, target, body, headers,
                                      max_body, remember=True)
            except OSError as exc:  # http1.BadAnswer too: nonsense is no answer
                why = str(exc) or type(exc).__name__
        if sent_again(method, target):
            raise_if_network_failed(self._url(target), why)
        raise RegistryRefused(f"no answer from {self.host}: {why}")

    def _schemes(self) -> list[str]:
        """The schemes to ask the host in, in order, before it answered: TLS alone with TLS
        verification on. Off, plain HTTP alone for a host the run found plain
        (registry_http's look-ups, or a thread of this client: threads starting together
        each failed a TLS handshake before the first answer said which scheme), or one
        that answers the API's base, `GET /v2/`, in plain HTTP as a registry does (200, or
        401 asking for a login): a host speaking TLS there answers that with an alert, a
        closed connection or a 400, and is asked in TLS, then plain HTTP, as skopeo asks.
        The base names no repository, tag or credential, and its connection is kept for
        the requests that follow: a registry reached in plain HTTP costs no TLS attempt
        (nor `ssl`'s import, a tenth of a `verify` of one image)."""
        if self.tls_verify:
            return ["https"]
        if self.host in _PLAIN:
            return _PLAIN[self.host]
        try:
            base = self._exchange("http", self.host, "GET", "/v2/", b"", {}, MAX_BASE)
        except (OSError, RegistryRefused):
            return ["https", "http"]
        if base.status not in (200, 401):
            return ["https", "http"]
        _PLAIN[self.host] = ["http"]
        return ["http"]

    def _exchange(self, scheme: str, host: str, method: str, target: str, body: bytes,
                  headers: dict[str, str], max_body: int, remember: bool = False) -> Reply:
        """One request on an idle open connection to HOST (a new one when there is none,
        or when the server closed the one kept: it may between two requests)."""
        with self._idle_lock:
            idle = self._idle.get((scheme, host))
            conn = idle.pop() if idle else None
        if conn is not None and conn.dropped():
            conn.close()
            conn = None
        try:
            if conn is not None:
                try:
                    response = conn.request(method, target, body, headers, max_body)
                except (ConnectionResetError, BrokenPipeError):  # http1.Closed among them
                    # Closed as the request went (the race the check above leaves): sent
                    # again at once on a new connection, when it may be sent again.
                    if not sent_again(method, target):
                        raise
                    conn.close()
                    conn = None
            if conn is None:
                conn = self._connect(scheme, host)
                response = conn.request(method, target, body, headers, max_body)
            reply = Reply(response.status, dict(response.headers), response.body)
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        if len(reply.body) > max_body:
            conn.close()
            raise RegistryRefused(f"{named(scheme, host, target)}: answer larger than "
                                  f"{max_body} bytes")
        if response.will_close:
            conn.close()
        else:
            with self._idle_lock:
                self._idle.setdefault((scheme, host), []).append(conn)
        if remember:
            self._scheme = scheme
            if scheme == "http" and not self.tls_verify:
                _PLAIN[host] = ["http"]
        return reply

    def _elsewhere(self, scheme: str, host: str, target: str, headers: dict[str, str],
                   max_body: int, what: str) -> Reply:
        """GET TARGET on another HOST the registry sent us to (WHAT: to name it by);
        RegistryRefused when it does not answer, TransientAnswer when it is busy. Its
        URL is named without its query (a signed URL's signature is a credential)."""
        url = named(scheme, host, target)
        try:
            reply = self._exchange(scheme, host, "GET", target, b"", headers, max_body)
        except OSError as exc:
            why = str(exc) or type(exc).__name__
            raise_if_network_failed(url, why, f"{what} does not answer: ")
            raise RegistryRefused(f"{what} {url} does not answer: {why}") from None
        if transient_status(reply.status):
            raise TransientAnswer(url, reply.status, "",
                                  parse_retry_after(reply.headers.get("retry-after")))
        return reply

    def _connect(self, scheme: str, host: str) -> http1.Connection:
        return http1.Connection(host, TIMEOUT,
                                _context(self.tls_verify) if scheme == "https" else None)

    def _authenticate(self, challenge: str, scope: str) -> None:
        basic = credentials(self.host, self.authfile)
        kind = challenge.split(" ", 1)[0].lower()
        if kind == "basic":
            if basic is None:
                raise RegistryRefused(f"{self.host} wants credentials the auth file does "
                                      f"not hold: log in (skopeo login {self.host})")
            self._basic = basic
            return
        if kind != "bearer":
            raise RegistryRefused(f"{self.host} asks for an authentication this client "
                                  f"does not speak: {challenge.split(' ', 1)[0][:40]}")
        from urllib.parse import urlencode, urlsplit

        params = dict(_CHALLENGE_PARAM.findall(challenge))
        realm = urlsplit(params.get("realm", ""))
        if realm.scheme not in ("http", "https") or not realm.netloc:
            raise RegistryRefused(f"{self.host} names no token realm")
        query = {"service": params.get("service", "")}
        if scope:
            query["scope"] = scope
        headers = {"Authorization": f"Basic {basic}"} if basic else {}
        reply = self._elsewhere(realm.scheme, realm.netloc, f"{realm.path}?{urlencode(query)}",
                                headers, 65536, f"{self.host}'s token service")
        if reply.status != 200:
            raise RegistryRefused(f"{self.host}'s token service refused a token "
                                  f"(status {reply.status})")
        try:
            answer = load_json(reply.body)
            token = answer.get("token") or answer["access_token"]
        except (ValueError, KeyError, AttributeError):
            token = None
        if not (isinstance(token, str) and token.isascii() and token.isprintable()):
            # A line break in it would be a header of its own.
            raise RegistryRefused(f"{self.host}'s token service sent no token")
        self._tokens[scope] = token

    # ---- the distribution API ----

    def get_manifest(self, repository: str, reference: str) -> Optional[tuple[bytes, str]]:
        """(bytes, media type) of REFERENCE (tag or digest) in REPOSITORY; None when absent.
        By digest, bytes that do not hash to it are refused."""
        _check_reference(reference)
        reply = self.request("GET", f"/v2/{repository}/manifests/{reference}",
                             headers={"Accept": ACCEPT}, scope=_pull(repository),
                             max_body=MAX_MANIFEST)
        if reply.status == 404:
            return None
        self._expect(reply, 200, "GET", f"{repository}:{reference}")
        if reference.startswith("sha256:") and digest_of(reply.body) != reference:
            raise RegistryRefused(f"{self.host}/{repository}@{reference}: the registry "
                                  "sent a manifest of another digest")
        media_type = reply.headers.get("content-type", "").split(";")[0].strip()
        with suppress(ValueError, AttributeError):
            media_type = load_json(reply.body).get("mediaType") or media_type
        return reply.body, media_type

    def put_manifest(self, repository: str, reference: str, body: bytes,
                     media_type: str) -> Reply:
        reply = self.request("PUT", f"/v2/{repository}/manifests/{reference}", body,
                             {"Content-Type": media_type}, scope=_push(repository))
        self._expect(reply, 201, "PUT", f"{repository}:{reference}")
        return reply

    def get_blob(self, repository: str, digest: str, max_size: int = MAX_BLOB) -> bytes:
        """DIGEST's bytes, at most MAX_SIZE of them (RegistryRefused for a longer answer)."""
        _check_reference(digest, digest_only=True)
        reply = self.request("GET", f"/v2/{repository}/blobs/{digest}",
                             scope=_pull(repository), max_body=max_size)
        if reply.status in (301, 302, 303, 307, 308):  # to storage: S3, a CDN
            from urllib.parse import urlsplit

            location = urlsplit(reply.headers.get("location", ""))
            target = location.path + (f"?{location.query}" if location.query else "")
            if not location.path:
                raise RegistryRefused(f"{self.host}/{repository}@{digest}: the registry "
                                      "redirected the blob nowhere (no Location)")
            if location.netloc in ("", self.host):  # the registry's own: with its login
                reply = self.request("GET", target, scope=_pull(repository),
                                     max_body=max_size)
            else:  # another host: never with the registry's login
                reply = self._elsewhere(location.scheme or "https", location.netloc, target,
                                        {}, max_size, f"{self.host}/{repository}@{digest}'s "
                                        "redirect")
        self._expect(reply, 200, "GET", f"{repository}@{digest}")
        if digest_of(reply.body) != digest:
            raise RegistryRefused(f"{self.host}/{repository}@{digest}: the registry sent a "
                                  "blob of another digest")
        return reply.body

    def put_blob(self, repository: str, data: bytes) -> str:
        """DATA as a blob of REPOSITORY; its digest. Not sent twice in a run, and sent
        without asking whether the registry holds it: what this client writes is small
        and nearly always new (a signature's payload holds its time, an SBOM its serial
        number), so the question would cost a request for nothing."""
        digest = digest_of(data)
        key = (repository, digest)
        with self._blob_lock:
            if key in self._blobs:
                return digest
            pending = self._uploading.get(key)
            if pending is None:
                import threading  # a write's, not on `verify`'s path

                mine = self._uploading[key] = threading.Event()
        if pending is not None:
            pending.wait()
            return self.put_blob(repository, data)  # sent, or the other upload failed
        try:
            self._upload(repository, data, digest)
            with self._blob_lock:
                self._blobs.add(key)
        finally:
            with self._blob_lock:
                del self._uploading[key]
            mine.set()
        return digest

    def open_uploads(self, repository: str, count: int) -> None:
        """COUNT upload sessions opened in REPOSITORY now (a POST each), for blobs made
        later: each is then sent with one request, not two (a signed verdict, made after
        promote's read-back, in the signing the promote waits for). A session not used
        holds nothing, and the registry purges it with its other stale uploads."""
        opened = side_by_side([partial(self._start_upload, repository)
                               for _ in range(count)])
        with self._blob_lock:
            self._opened.setdefault(repository, []).extend(opened)

    def _start_upload(self, repository: str) -> str:
        """A new upload session of REPOSITORY: its location."""
        start = self.request("POST", f"/v2/{repository}/blobs/uploads/",
                             scope=_push(repository))
        self._expect(start, 202, "POST", f"{repository} (blob upload)")
        return start.headers.get("location", "")

    def _upload(self, repository: str, data: bytes, digest: str) -> None:
        if self._mounted(repository, digest):
            return
        with self._blob_lock:
            opened = self._opened.get(repository)
            location = opened.pop() if opened else None
        if location is not None:
            done = self._finish_upload(repository, location, data, digest)
            if done.status != 404:  # else the registry dropped the session: a new one
                self._expect(done, 201, "PUT", f"{repository}@{digest}")
                return
        done = self._finish_upload(repository, self._start_upload(repository), data,
                                   digest)
        self._expect(done, 201, "PUT", f"{repository}@{digest}")

    def _mounted(self, repository: str, digest: str) -> bool:
        """Whether DIGEST, sent to another repository of this registry in this run (the
        empty config every sigstore attachment and attestation names), is now
        REPOSITORY's too by one cross-repository mount (a POST naming it), not uploaded
        (a POST and a PUT, each a write of the registry's). A registry that answers the
        mount with an upload session of its own (202) is not asked again; any other
        answer (a login without access to the other repository) leaves the blob to a
        plain upload."""
        with self._blob_lock:
            # The first upload of DIGEST in the run waits for none; the others wait for
            # it (the repositories of a promote send the empty config at once), then
            # mount what it sent.
            mine = self._uploading[(repository, digest)]
            first = self._first_upload.setdefault(digest, mine)
        if first is not mine:
            first.wait()
        with self._blob_lock:
            source = None if self._no_mount else next(
                (other for other, known in self._blobs
                 if known == digest and other != repository), None)
        if source is None:
            return False
        from urllib.parse import urlencode

        start = self.request("POST", f"/v2/{repository}/blobs/uploads/?" + urlencode(
            {"mount": digest, "from": source}), scope=_push(repository))
        if start.status == 201:
            return True
        with self._blob_lock:
            self._no_mount = True
            if start.status == 202:  # a session instead: the bytes go into it
                self._opened.setdefault(repository, []).append(
                    start.headers.get("location", ""))
        return False

    def _finish_upload(self, repository: str, location: str, data: bytes,
                       digest: str) -> Reply:
        from urllib.parse import urlencode, urlsplit

        parts = urlsplit(location)
        target = (parts.path or location) + "?" + "&".join(
            x for x in (parts.query, urlencode({"digest": digest})) if x)
        return self.request("PUT", target, data,
                            {"Content-Type": "application/octet-stream"},
                            scope=_push(repository))

    def put_blobs(self, repository: str, blobs: Sequence[bytes]) -> None:
        """Each of BLOBS as a blob of REPOSITORY, side by side (an upload is two requests
        in a row, each waiting for the registry). Those this run sent already start no
        thread: after promote's read-back most are (uploaded while the image copied), and
        on a loaded host each thread started waited to be run."""
        unique = {digest_of(data): data for data in blobs}
        with self._blob_lock:
            new = [data for digest, data in unique.items()
                   if (repository, digest) not in self._blobs]
        side_by_side([partial(self.put_blob, repository, data) for data in new])

    @property
    def referrers_api(self) -> Optional[bool]:
        """Whether the registry has the referrers API; None until it was asked."""
        return self._referrers_api

    def referrers(self, repository: str, digest: str) -> Optional[list[dict[str, Any]]]:
        """The referrers API's descriptors of DIGEST; None when the registry has no such
        API (it answers 404, as distribution 2.8 does)."""
        if self._referrers_api is False:
            return None
        reply = self.request("GET", f"/v2/{repository}/referrers/{digest}",
                             headers={"Accept": OCI_INDEX}, scope=_pull(repository),
                             max_body=MAX_MANIFEST)
        if reply.status == 404:
            self._referrers_api = False
        if reply.status != 200 or not reply.headers.get(
                "content-type", "").startswith(OCI_INDEX):
            return None
        self._referrers_api = True
        try:
            manifests = load_json(reply.body).get("manifests")
        except (ValueError, AttributeError):
            return None
        return [m for m in manifests or [] if isinstance(m, dict)]

    def _expect(self, reply: Reply, status: int, method: str, what: str) -> None:
        if reply.status != status:
            why = _error_text(reply.body)
            raise RegistryRefused(f"{self.host}/{what}: the registry refused {method} "
                                  f"(status {reply.status}{': ' + why if why else ''})")


# Requests side by side at most (an attachment may list many signatures).
SIDE_BY_SIDE = 8


def side_by_side(calls: Sequence[Callable[[], T]]) -> list[T]:
    """CALLS (requests to registries: each mostly waits for answers), up to SIDE_BY_SIDE
    at once, this thread taking its share; their results in order, the first exception
    raised once all are done. Threads of `_thread`, each releasing a lock of its own when
    done, which the caller takes to join it (a wait a signal interrupts, as a Thread's
    join): concurrent.futures costs `verify` more to import than the requests it runs side
    by side take, and `threading` (its classes and start-up state) 3% of a `verify`."""
    results: list[Any] = [None] * len(calls)
    failures: list[Optional[BaseException]] = [None] * len(calls)
    lock = _thread.allocate_lock()
    pending = iter(range(len(calls)))

    def work(done: Optional[_thread.LockType] = None) -> None:
        try:
            while True:
                with lock:
                    index = next(pending, None)
                if index is None:
                    return
                try:
                    results[index] = calls[index]()
                except BaseException as exc:  # raised in the caller's thread below
                    failures[index] = exc
        finally:
            if done is not None:
                done.release()

    helpers = []
    for _ in range(min(len(calls), SIDE_BY_SIDE) - 1):
        done = _thread.allocate_lock()
        done.acquire()  # released by the helper as it ends
        _thread.start_new_thread(work, (done,))
        helpers.append(done)
    work()
    for done in helpers:
        done.acquire()
    for failure in failures:
        if failure is not None:
            raise failure
    return results


def _check_reference(reference: str, digest_only: bool = False) -> None:
    """RegistryRefused for a reference no registry can hold (a registry's answer naming a
    digest like `sha256:../x` is not followed)."""
    if not (is_digest(reference) or not digest_only and _is_tag(reference)):
        raise RegistryRefused(f"not a {'digest' if digest_only else 'tag or digest'}: "
                              f"{reference[:80]!r}")


def sent_again(method: str, target: str) -> bool:
    """Whether METHOD TARGET may be sent again after the network failed it: a GET or HEAD;
    a PUT, which this client sends only whole (a manifest, or an upload's completion with
    all its bytes: a second one writes the same); a POST only where it starts a blob
    upload (a session the first may have opened is left unused: the registry expires
    it)."""
    if method in ("GET", "HEAD", "PUT"):
        return True
    return method == "POST" and target.split("?", 1)[0].endswith("/blobs/uploads/")


def is_digest(text: str) -> bool:
    """Whether TEXT is a sha256 digest (`sha256:` and 64 lowercase hex digits)."""
    return len(text) == 71 and text.startswith("sha256:") and is_lower_hex(text[7:])


def _is_tag(text: str) -> bool:
    return 0 < len(text) <= 128 and text[0] in _TAG_FIRST and _TAG_REST.issuperset(text)


def _pull(repository: str) -> str:
    return f"repository:{repository}:pull"


def _push(repository: str) -> str:
    return f"repository:{repository}:pull,push"


def digest_of(data: bytes) -> str:
    """DATA's digest, hashed without loading OpenSSL (`hashlib`): what this client hashes
    is small (manifests, signatures, attestations)."""
    return f"sha256:{hexdigest('sha256', data)}"


def _error_text(body: bytes) -> str:
    """The first error message of a registry's JSON error answer."""
    try:
        errors = load_json(body).get("errors") or []
        first = errors[0]
        return " ".join(str(first.get(k)) for k in ("code", "message") if first.get(k))[:200]
    except (ValueError, AttributeError, IndexError, TypeError):
        return ""
