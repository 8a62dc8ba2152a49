"""Where `aipcc-build index pulp+https://HOST` finds its Pulp credentials: the way pulp-cli
does, so that one configuration serves both.

pulp-cli's file is $XDG_CONFIG_HOME/pulp/cli.toml (~/.config/pulp/cli.toml); its `[cli]`
table is the default profile, `[cli-NAME]` the profile NAME (chosen with --profile, or
PULP_CLI_PROFILE as pulp-cli reads it, or PULP_PROFILE). Its keys used here: base_url,
api_root, domain, username, password, client_id, client_secret, verify_ssl, cert, key,
timeout. PULP_USERNAME, PULP_PASSWORD, PULP_CLIENT_ID, PULP_CLIENT_SECRET and
PULP_VERIFY_SSL override the file. A profile is only used for the server it names: the
password of one server is never sent to another.

client_id and client_secret are OAuth2 client credentials, as pulp-cli (pulp-glue) uses
them: a bearer token is fetched from the token URL the server's API document names (the
client-credentials flow of an `oauth2` security scheme) and sent instead of the password.

Nothing here prints a credential, and no error message carries one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit

from ..errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9/3.10
    import tomli as tomllib

DEFAULT_API_ROOT = "/pulp/"
DEFAULT_TIMEOUT = 60.0  # seconds, one HTTP request


@dataclass(frozen=True)
class PulpServer:
    """One Pulp API server and how to talk to it."""

    base_url: str  # https://host[:port]
    api_root: str = DEFAULT_API_ROOT
    domain: Optional[str] = None
    username: Optional[str] = field(default=None, repr=False)
    password: Optional[str] = field(default=None, repr=False)
    client_id: Optional[str] = field(default=None, repr=False)  # OAuth2 client credentials
    client_secret: Optional[str] = field(default=None, repr=False)
    verify_ssl: bool = True
    cert: Optional[str] = None  # client certificate (PEM), pulp-cli's `cert`
    key: Optional[str] = None
    timeout: float = DEFAULT_TIMEOUT

    @property
    def api(self) -> str:
        """The API prefix: /pulp/api/v3/, with the domain when there is one."""
        root = "/" + self.api_root.strip("/") + "/"
        return f"{root}{self.domain}/api/v3/" if self.domain else f"{root}api/v3/"


def parse_target(target: str) -> str:
    """pulp+https://HOST[:PORT] (or pulp+http://) -> https://HOST[:PORT]."""
    scheme, _, rest = target.partition("+")
    parts = urlsplit(rest)
    if scheme != "pulp" or parts.scheme not in ("http", "https") or not parts.hostname \
            or parts.path.strip("/") or parts.query or parts.fragment or "@" in parts.netloc:
        raise InputError(f"'{target}' is not pulp+https://HOST[:PORT] (nor pulp+http://; "
                         "credentials go in pulp-cli's cli.toml or PULP_USERNAME/"
                         "PULP_PASSWORD, not in the URL)", field="root")
    return f"{parts.scheme}://{parts.netloc}"


def config_path(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME", "~"))
                                                   .expanduser() / ".config")
    return Path(base) / "pulp" / "cli.toml"


def _same_server(a: str, b: str) -> bool:
    one, two = urlsplit(a), urlsplit(b)
    default = {"http": 80, "https": 443}
    return (one.scheme, one.hostname, one.port or default.get(one.scheme)) == \
        (two.scheme, two.hostname, two.port or default.get(two.scheme))


def _profile(path: Path, name: Optional[str]) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        if name:
            raise InputError(f"{path}: no such file (profile '{name}' was asked for)",
                             field="profile") from None
        return {}
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}", field="profile") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The parser's message names line and column, never the value.
        raise InputError(f"{path}: not valid TOML: {exc}", field="profile") from None
    table = "cli" if not name else f"cli-{name}"
    found = data.get(table)
    if found is None:
        if name:
            raise InputError(f"{path}: no [{table}] profile", field="profile")
        return {}
    if not isinstance(found, dict):
        raise InputError(f"{path}: [{table}] is not a table", field="profile")
    return found


def server(target: str, profile: Optional[str] = None,
           environ: Optional[Mapping[str, str]] = None) -> PulpServer:
    """The server TARGET names, with the credentials pulp-cli would use for it."""
    env = os.environ if environ is None else environ
    base_url = parse_target(target)
    name = profile or env.get("PULP_CLI_PROFILE") or env.get("PULP_PROFILE") or None
    path = config_path(env)
    settings = _profile(path, name)
    configured = settings.get("base_url")
    if configured and not _same_server(str(configured), base_url):
        if name:
            raise InputError(f"{path}: profile '{name}' is for {configured}, not {base_url}",
                             field="profile")
        settings = {}  # the default profile is for another server: not its credentials
    for key in ("username", "password", "client_id", "client_secret", "api_root", "domain",
                "cert", "key"):
        value = settings.get(key)
        if value is not None and not isinstance(value, str):
            raise InputError(f"{path}: {key} must be a string", field="profile")

    def flag(value: Any, what: str) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            return value.lower() in ("true", "1")
        raise InputError(f"{what}: verify_ssl must be true or false", field="profile")

    verify = flag(settings.get("verify_ssl", True), str(path))
    if "PULP_VERIFY_SSL" in env:
        verify = flag(env["PULP_VERIFY_SSL"], "PULP_VERIFY_SSL")
    timeout = settings.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise InputError(f"{path}: timeout must be a number of seconds", field="profile")
    client_id = env.get("PULP_CLIENT_ID") or settings.get("client_id") or None
    client_secret = env.get("PULP_CLIENT_SECRET") or settings.get("client_secret") or None
    if (client_id is None) != (client_secret is None):
        # pulp-cli would prompt for the missing half; a publish runs unattended.
        have, missing = ("client_id", "client_secret") if client_id else \
            ("client_secret", "client_id")
        raise InputError(f"{path} (or PULP_CLIENT_ID/PULP_CLIENT_SECRET): {have} without "
                         f"{missing}", field="profile")
    return PulpServer(
        base_url=base_url,
        api_root=settings.get("api_root") or DEFAULT_API_ROOT,
        domain=settings.get("domain") or None,
        username=env.get("PULP_USERNAME") or settings.get("username"),
        password=env.get("PULP_PASSWORD") or settings.get("password"),
        client_id=client_id, client_secret=client_secret,
        verify_ssl=verify, cert=settings.get("cert"), key=settings.get("key"),
        timeout=float(timeout))
