"""What is checked before the first build starts, so that a run fails in a second with one
clear error instead of after an hour: end-of-life toolkits, build contexts, the capacity,
emulation for foreign platforms, the registries a pushing run goes to."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from ..errors import CheckFailed, InputError
from ..matrix import ImageSpec
from ..matrix.model import parse_quantity
from ..matrix.platforms import describe, host_platform
from ..plan import BuildPlan, build_context

if TYPE_CHECKING:
    from ..tools.registry_http import Answer
    from ..tools.retry import Retry

# GET(*ARGS), a registry's or an index's answer, asked again while the network fails it:
# `_asking`'s.
Ask = Callable[..., "Answer"]

# Where the kernel lists the interpreters it runs foreign binaries with (qemu-aarch64, ...).
BINFMT_DIR = "/proc/sys/fs/binfmt_misc"
# A parameter of a registry's WWW-Authenticate challenge (`realm="..."`); a name starts
# after a non-word character, so a long word is read once (linear in the answer).
CHALLENGE_PARAMETER = re.compile(r'(?<!\w)(\w+)="([^"]*)"')


def parse_capacity(text: str) -> dict[str, float]:
    """`cpu=8,memory=32Gi,gpu=0` -> {"cpu": 8, "memory": 34359738368, "gpu": 0}."""
    capacity: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, amount = item.partition("=")
        value = parse_quantity(amount)
        if not sep or not name.strip() or value is None:
            raise InputError(f"'{item}' is not SLOT=AMOUNT (like cpu=8 or memory=32Gi)",
                             field="capacity")
        capacity[name.strip()] = value
    return capacity


def detect_capacity() -> dict[str, float]:
    """This host's CPUs and memory, and emulated builds at once: half the CPUs (qemu keeps
    a CPU busy all along a RUN step); named slots (gpu...) only exist when given."""
    cpus = os.cpu_count() or 1
    capacity: dict[str, float] = {"cpu": float(cpus), "emulation": float(max(1, cpus // 2))}
    with contextlib.suppress(ValueError, OSError, AttributeError):
        capacity["memory"] = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return capacity


def check_eol(images: Sequence[ImageSpec], today: dt.date, allow_eol: bool) -> list[str]:
    """Refuse toolkit versions past their `eol` date unless allowed; return the messages
    (for a warning when allowed)."""
    past: dict[tuple[str, str], str] = {}
    for image in images:
        toolkit = image.toolkit
        if toolkit is not None and toolkit.eol is not None and toolkit.eol < today:
            past[(image.accelerator, toolkit.version)] = (
                f"{image.accelerator} {toolkit.version} reached end of life on "
                f"{toolkit.eol.isoformat()}"
            )
    messages = list(past.values())
    if messages and not allow_eol:
        raise CheckFailed("; ".join(messages) + " (drop it from the matrix, or allow "
                          "end-of-life builds)", field="allow_eol")
    return messages


def check_contexts(images: Sequence[ImageSpec]) -> None:
    for image in images:
        context = build_context(image)
        if not Path(context).is_dir():
            raise InputError(f"the build context of {image.key} does not exist: {context}",
                             field=f"images.{image.kind}.context")


def check_requirements(images: Sequence[ImageSpec]) -> None:
    """Refuse, before anything builds, an image whose requirements file (the matrix's
    `requirements`, what its template installs) resolves to wheels of another toolkit than
    the image's: the set is judged as `validate --requirements` judges it, resolved against
    the image's wheel index. Each file is judged once per toolkit release and index."""
    from ..validate import Expectation
    from ..validate.requirements import RequirementsRequest
    from ..validate.requirements import check_requirements as judge

    judged: dict[tuple[str, str, Optional[str], Optional[str]], list[str]] = {}
    for image in images:
        if image.requirements is None:
            continue
        key = (image.requirements, image.accelerator, image.version, image.wheel_index)
        if key not in judged:
            verdict = judge(RequirementsRequest(
                Path(image.requirements), Expectation(image.accelerator, image.version,
                                                      source="matrix"), image.wheel_index))
            judged[key] = [f"{f.component} {f.component_version}: {f.reason}"
                           for f in verdict.findings if f.status == "violation"]
        if judged[key]:
            raise CheckFailed(f"{image.key}: its requirements ({image.requirements}) bring "
                              "another toolkit: " + "; ".join(judged[key]),
                              field=f"images.{image.kind}.requirements")


def check_emulation(plan: BuildPlan, binfmt_dir: str = BINFMT_DIR) -> None:
    """Refuse, before anything builds, a foreign platform no emulator is registered for:
    its first RUN step would fail with "exec format error" after the native builds ran."""
    host = host_platform()
    missing = sorted({build.platform for build in plan.builds
                      if build.emulated and not emulator_registered(build.platform, binfmt_dir)})
    if missing:
        entries = ", ".join(f"qemu-{describe(p).machine}" for p in missing)
        raise InputError(
            f"{', '.join(missing)} is not this host's platform ({host}) and no emulator is "
            f"registered for it (no enabled {entries} in {binfmt_dir}): register "
            "qemu-user-static with binfmt_misc (scripts/setup-emulation does), build on such "
            "a host, or select the host's platform only", field="platforms")


def emulator_registered(platform: str, binfmt_dir: str = BINFMT_DIR) -> bool:
    """Whether binfmt_misc has an enabled qemu entry for PLATFORM's CPU."""
    machine = describe(platform).machine
    for name in (f"qemu-{machine}", f"qemu-{machine}-static"):
        try:
            with open(os.path.join(binfmt_dir, name), encoding="utf-8") as entry:
                if entry.readline().strip() == "enabled":
                    return True
        except OSError:
            continue
    return False


def check_registries(references: Sequence[str], tls_verify: bool,
                     environ: Mapping[str, str],
                     timeout: Optional[float] = None, retry: Optional[Retry] = None,
                     sleep: Optional[Callable[[float], None]] = None) -> None:
    """Before a pushing run builds anything: every registry REFERENCES go to answers
    (`GET /v2/` within TIMEOUT seconds, registry_http's own by default) and, when it asks
    for a login and the auth file has credentials for it, accepts them. CheckFailed naming
    the registry otherwise: a registry that accepts connections and never answers would
    hold every push for its whole timeout, after the builds. A GET the network failed
    (reset, refused, timed out) is asked again with RETRY's backoff (`tools.retry`'s
    default bound)."""
    from ..tools import registry_http

    timeout = registry_http.TIMEOUT if timeout is None else timeout
    ask = _asking(retry, sleep)
    for host in sorted({reference.split("/", 1)[0] for reference in references}):
        try:
            answer = ask(registry_http.get, host, "/v2/", tls_verify, timeout)
        except registry_http.PlainHTTP:
            raise CheckFailed(f"the registry {host} speaks plain HTTP, not HTTPS: use it with "
                              "TLS verification off", field="tls_verify") from None
        except registry_http.Unreachable as exc:
            raise CheckFailed(f"registry {host} does not answer within {timeout:g} s: {exc}",
                              field="registry") from None
        if answer.status != 401:
            continue
        login = _auth_of(host, environ)
        if login is None:
            continue  # buildah may have other ways in (credential helpers): the push tells
        challenge = answer.headers.get("www-authenticate", "")
        if not _accepts(host, challenge, login, tls_verify, timeout, ask):
            raise CheckFailed(f"registry {host} does not accept the credentials the auth "
                              "file holds for it", field="registry")


def _asking(retry: Optional[Retry], sleep: Optional[Callable[[float], None]]) -> Ask:
    """A GET's answer, asked again while the network fails it (`NetworkFailure`) through
    `tools.retry`'s one backoff; Unreachable, saying why, once RETRY's attempts ran out."""
    import time

    from ..tools.registry_http import Unreachable
    from ..tools.retry import Retry, StillFailing, with_retries

    bound = retry or Retry()

    def ask(get: Callable[..., Answer], *args: object) -> Answer:
        try:
            return with_retries(lambda: get(*args), bound, lambda *_: None,
                                sleep or time.sleep)
        except StillFailing as exc:
            raise Unreachable(f"{exc.stderr} (tried {bound.attempts} times)") from None

    return ask


def _auth_of(host: str, environ: Mapping[str, str]) -> Optional[str]:
    """The base64 user:password the containers auth files hold for HOST (buildah's order:
    REGISTRY_AUTH_FILE, the runtime dir's, ~/.config/containers', ~/.docker's)."""
    from ..tools.oci_registry import header_login, read_auth_file

    home = environ.get("HOME", "")
    candidates = [environ.get("REGISTRY_AUTH_FILE", ""),
                  os.path.join(environ.get("XDG_RUNTIME_DIR", ""), "containers", "auth.json")
                  if environ.get("XDG_RUNTIME_DIR") else "",
                  os.path.join(home, ".config", "containers", "auth.json") if home else "",
                  os.path.join(home, ".docker", "config.json") if home else ""]
    for candidate in filter(None, candidates):
        try:
            auths = read_auth_file(Path(candidate)).get("auths") or {}
        except (OSError, ValueError, AttributeError):
            continue
        entry = auths.get(host) if isinstance(auths, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("auth"), str):
            return header_login(entry["auth"], host, candidate)
    return None


def _accepts(host: str, challenge: str, login: str, tls_verify: bool,
             timeout: float, ask: Ask) -> bool:
    """Whether HOST takes LOGIN: Basic on /v2/, or a token from a Bearer realm."""
    import urllib.parse

    basic = {"Authorization": f"Basic {login}"}
    if not challenge.lower().startswith("bearer"):
        return _status(host, host, "/v2/", tls_verify, timeout, basic, ask) != 401
    params = dict(CHALLENGE_PARAMETER.findall(challenge))
    realm = urllib.parse.urlsplit(params.get("realm", ""))
    if not realm.netloc:
        return True  # nothing to ask: the push tells
    query = urllib.parse.urlencode({"service": params.get("service", ""), "account": ""})
    return _status(host, realm.netloc, f"{realm.path or '/'}?{query}",
                   tls_verify and realm.scheme == "https", timeout, basic, ask
                   ) not in (401, 403)


def _status(registry: str, host: str, target: str, tls_verify: bool, timeout: float,
            headers: Mapping[str, str], ask: Ask) -> int:
    """The status of GET TARGET on HOST (REGISTRY's, or its token service). CheckFailed
    when it does not answer, as of a registry that does not answer: the network failed,
    which says nothing of the login."""
    from ..tools import registry_http

    try:
        return ask(registry_http.get, host, target, tls_verify, timeout, headers).status
    except registry_http.Unreachable as exc:
        asked = "" if host == registry else f" (its token service {host})"
        raise CheckFailed(f"registry {registry}{asked} does not answer within {timeout:g} s "
                          f"when asked with the auth file's login: {exc}",
                          field="registry") from None


def check_wheel_indexes(images: Sequence[ImageSpec], timeout: Optional[float] = None,
                        retry: Optional[Retry] = None) -> None:
    """Before the first build: the wheel index each image installs from (`wheel_index`)
    answers. A variant nobody published yet answers 404, and its images would fail minutes
    in, on pip's "No matching distribution found". An index asking for credentials (401,
    403) passes: the build gives them, this check has none. A refusal names the request
    field that skips the check (a new version tried before its index exists). A GET the
    network failed is asked again with RETRY's backoff, as the registry check does."""
    from urllib.parse import urlsplit

    from ..errors import without_credentials
    from ..tools import registry_http

    timeout = registry_http.TIMEOUT if timeout is None else timeout
    ask = _asking(retry, None)
    users: dict[str, list[str]] = {}
    for image in images:
        if image.wheel_index:
            users.setdefault(image.wheel_index, []).append(image.key)
    for url, keys in sorted(users.items()):
        what = f"the wheel index {without_credentials(url)} (of {', '.join(keys)})"
        try:
            answer = ask(registry_http.get_url, url, timeout)
        except registry_http.Unreachable as exc:
            raise CheckFailed(f"{what} does not answer within {timeout:g} s: {exc}",
                              field="wheel_index") from None
        if answer.status < 400 or answer.status in (401, 403):
            continue
        hint = ""
        if answer.status == 404:
            hint = (": nothing is published for this variant yet. Publish its wheels "
                    "(aipcc-build index), or request the index (add-version prints the "
                    "request)")
            if urlsplit(url).hostname in ("localhost", "127.0.0.1", "::1"):
                hint += ("; for the demo, add a `# [VARIANT]` section for it to "
                         "matrix/demo-wheels.txt and rerun scripts/demo-index")
        raise CheckFailed(f"{what} answers {answer.status} {answer.reason}{hint}; or build "
                          "without this check", field="skip_wheel_index_check")
