"""Which wheel indexes pip and uv in an image use, and whether they belong to its toolkit.

An image names its indexes in its environment (pip's and uv's variables for the index, the
extra indexes and find-links) and in config files: `/etc/pip.conf`, `/etc/xdg/pip/pip.conf`,
a venv's `pip.conf`, `/etc/uv/uv.toml`, and whatever `PIP_CONFIG_FILE` / `UV_CONFIG_FILE`
name. Layers are scanned once and cached, before the image's environment is known, so every
`pip.conf`, `pip.ini` and `uv.toml` a layer holds is read; the verdict judges the ones left
in the final filesystem. A file the variables name under another name (or through a
symlink) is read afterwards from the image's layer stack (`lookup`), as INI for pip and
TOML for uv whatever its name, and judged the same way; uv refuses to run when its file is
missing, pip ignores a missing one.

How readers authenticate is labelled (`ai.aipcc.wheel-index.auth`, the matrix's
`wheel_index_auth`); the environment must agree: client-cert needs the uv wrapper's
directory on PATH and no fixed certificate variable (which would replace the host's
entitlement), netrc needs NETRC; an image declared unauthenticated that presents
credentials anyway gets a warning.

An index whose URL names another toolkit release or accelerator (`cuda12.9-ubi9` in a CUDA
12.8 image, a ROCm index in a CUDA image) fails the image; an index that names none (public
PyPI beside ours) is a warning: pip may then pick a wheel built against another toolkit.
"""

from __future__ import annotations

import posixpath
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

from .. import image_labels
from ..image_index_settings import (
    AUTH_BIN,
    INDEX_AUTH_MODES,
    INDEX_VARIABLES,
    NETRC_SECRET,
    PIP_CONFIG_FILE,
    UV_CONFIG_FILE,
)
from ..patterns import lazy
from ..records import replace
from ..toolkit.spellings import CU_TAG, cu_release
from .constraints_check import CONSTRAINTS_KEY, judge_constraints
from .results import OK, VIOLATION, WARNING, Expectation, Finding, IndexSetting, LayerScan

if TYPE_CHECKING:
    from ..imagefs.image import PlatformImage
    from ..imagefs.lookup import FileRead
    from ..imagefs.overlay import Stack

# Variables that give pip and uv a certificate of their own.
CERT_VARIABLES = ("PIP_CLIENT_CERT", "SSL_CLIENT_CERT")

# The config files a layer scan reads (by name: the environment that names others comes
# later). Paths as the walker gives them, with a leading "/".
# The constraints file the renderer writes is read with them (constraints_check).
CONFIG_FILE = lazy(r"/(?:pip\.conf|pip\.ini|uv\.toml|aipcc-constraints\.txt)$")
# Variables pip and uv read, and whether each holds one URL or a space-separated list.
# UV_INDEX entries may be named: "name=https://...".
ENV_VARIABLES = {
    "PIP_INDEX_URL": False, "PIP_EXTRA_INDEX_URL": True, "PIP_FIND_LINKS": True,
    "UV_DEFAULT_INDEX": False, "UV_INDEX_URL": False, "UV_INDEX": True,
    "UV_EXTRA_INDEX_URL": True, "UV_FIND_LINKS": True,
}
# Keys (pip's INI, uv's TOML, uv's [pip] table) that name indexes.
_PIP_KEYS = ("index-url", "extra-index-url", "find-links")
_PRIMARY = (*INDEX_VARIABLES, "index-url", "index.default")

# What an index URL says about its toolkit: Red Hat AI's variants (cuda12.9-ubi9,
# rocm6.4-ubi9, cpu-ubi9), paths like cuda/12.9, and PyTorch's cu128 / rocm6.4 / cpu.
_VERSIONED = lazy(r"(?:^|[/_.-])(cuda|rocm)[-_/]?(\d+)\.(\d+)(?=$|[/_.-])")
_PYTORCH_CUDA = lazy(rf"(?:^|/){CU_TAG}(?=$|/)")
_UNVERSIONED = lazy(r"(?:^|/)(cuda|rocm|cpu)(?=$|[/_-])")


def settings_from_text(path: str, text: str, toml: bool
                       ) -> tuple[list[IndexSetting], Optional[str]]:
    """The index settings of a uv (TOML) or pip (INI) config file, and a parse error."""
    # Only images that carry such a file pay for these imports.
    import configparser

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    if path.endswith("/aipcc-constraints.txt"):
        from .constraints_check import constraints_setting

        return [constraints_setting(path, text)], None
    try:
        if toml:
            return _uv_settings(path, tomllib.loads(text)), None
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        parser.read_string(text, source=path)
    except (tomllib.TOMLDecodeError, configparser.Error, UnicodeError) as exc:
        return [], f"cannot parse: {str(exc).splitlines()[0]}"
    found: list[IndexSetting] = []
    for section in parser.sections():
        for key, value in parser.items(section):
            name = key.replace("_", "-")
            if name in _PIP_KEYS:
                found.extend(IndexSetting(path, f"{section}.{name}", url)
                             for url in value.split())
    return found, None


def _uv_settings(path: str, data: Mapping[str, Any]) -> list[IndexSetting]:
    found: list[IndexSetting] = []
    for table, prefix in ((data, ""), (data.get("pip"), "pip.")):
        if not isinstance(table, Mapping):
            continue
        for key in _PIP_KEYS:
            value = table.get(key)
            urls = value if isinstance(value, list) else [value] if value else []
            found.extend(IndexSetting(path, prefix + key, str(url)) for url in urls)
    indexes = data.get("index")
    for entry in indexes if isinstance(indexes, list) else []:
        if isinstance(entry, Mapping) and entry.get("url"):
            key = "index.default" if entry.get("default") else "index"
            found.append(IndexSetting(path, key, str(entry["url"])))
    return found


def settings_from_env(env: Mapping[str, str]) -> list[IndexSetting]:
    found = []
    for name, many in ENV_VARIABLES.items():
        value = env.get(name, "").strip()
        for item in value.split() if many else [value] if value else []:
            url = item.split("=", 1)[1] if name == "UV_INDEX" and "=" in item.split("/")[0] \
                else item
            found.append(IndexSetting(f"config:Env/{name}", name, url))
    return found


def toolkit_of(url: str) -> Optional[tuple[str, Optional[str]]]:
    """(accelerator, major.minor or None) the URL's path names, or None for a foreign index."""
    path = url.split("://", 1)[-1].partition("/")[2].lower()
    match = _VERSIONED.search(path)
    if match:
        return match.group(1), f"{int(match.group(2))}.{int(match.group(3))}"
    match = _PYTORCH_CUDA.search(path)
    if match:
        return "cuda", cu_release(*match.groups())
    match = _UNVERSIONED.search(path)
    return (match.group(1), None) if match else None


def _same(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def _primary(key: str) -> bool:
    # pip's INI keys carry their section ("global.index-url"), uv's [pip] table "pip.".
    return key in _PRIMARY or key.endswith(".index-url")


def judge_settings(settings: Sequence[tuple[IndexSetting, Optional[str]]],
                   expected: Expectation, index: Optional[str]) -> list[Finding]:
    """A finding per setting (with the layer digest of its file, None for the environment):
    an index of another toolkit is a violation, a foreign one a warning."""
    findings = []
    for setting, digest in settings:
        url = setting.url
        claim = toolkit_of(url)
        status, reason = _judge_claim(claim, expected, _primary(setting.key))
        own = index is not None and _same(url, index)
        if own and status == WARNING:  # ours, though its URL does not say so
            status, reason = OK, "the image's own index"
        elif own:
            reason += " (the image's own index)"
        elif index is not None and status != OK:
            reason += f" (the image's index is {index})"
        findings.append(Finding(
            status, "index-config", setting.source, reason,
            toolkit=claim[0] if claim else None, version=claim[1] if claim else None,
            component=setting.key, component_version=url, layer_digest=digest))
    return findings


def _judge_claim(claim: Optional[tuple[str, Optional[str]]], expected: Expectation,
                 primary: bool) -> tuple[str, str]:
    role = "the index" if primary else "an extra index"
    if claim is None:
        return WARNING, (f"{role} is not one of ours: pip and uv may pick a wheel built "
                         f"against another toolkit than {expected}")
    accelerator, release = claim
    named = f"{accelerator} {release}" if release else accelerator
    if accelerator != expected.accelerator:
        return VIOLATION, f"{role} serves {named} wheels, in a {expected} image"
    if accelerator not in ("cuda", "rocm"):
        return OK, f"{role} serves {named} wheels"
    if release is None or expected.release is None:
        return WARNING, f"{role} does not say which {accelerator} release it serves"
    if release != expected.release:
        return VIOLATION, f"{role} serves {named} wheels, in a {expected} image"
    return OK, f"{role} serves {named} wheels"


def named_files(env: Mapping[str, str], workdir: str) -> list[tuple[str, str]]:
    """(variable, path) of the config files the environment names; a relative path is
    taken from the image's working directory, and ".." lexically, as the scans do."""
    named = []
    for name in (PIP_CONFIG_FILE, UV_CONFIG_FILE):
        value = env.get(name, "")
        if value and value != "/dev/null":
            path = posixpath.normpath(posixpath.join("/", workdir, value))
            named.append((name, "/" + path.lstrip("/")))
    return named


# What a config file that does not parse does to the tool that loads it.
TOOL_STOPS = {
    "pip": "pip cannot load it, so every pip command in the image fails",
    "uv": "uv cannot load it, so every uv command in the image fails",
}
# Why a config file pip or uv loads that is too large for the validator to read fails the
# image: the tool reads it, and the indexes it sets go unjudged.
UNJUDGED_SETTINGS = {tool: f"{tool} loads it, so the indexes it sets were not judged"
                     for tool in TOOL_STOPS}


def files_the_tools_load(env: Mapping[str, str]) -> dict[str, str]:
    """Config file -> "pip" or "uv", for the files at fixed places that pip and uv load in
    an image with environment ENV (besides the ones its variables name): a file there that
    does not parse stops the tool. pip loads its global, user and site files and then
    PIP_CONFIG_FILE's; uv loads its system and user files only when UV_CONFIG_FILE (or
    UV_NO_CONFIG) does not replace them (of its system files the first that exists: all
    are listed, a broken one beside another is a false alarm worth the simplicity)."""
    system = [d.rstrip("/") for d in (env.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")
              if d.startswith("/")]
    home = env.get("HOME", "").rstrip("/") if env.get("HOME", "").startswith("/") else None
    venv = env.get("VIRTUAL_ENV", "").rstrip("/")
    loaded: dict[str, str] = {}
    if env.get(PIP_CONFIG_FILE) != "/dev/null":  # pip's way to load no file at all
        pip = [*(f"{d}/pip/pip.conf" for d in system), "/etc/pip.conf"]
        pip += [f"{venv}/pip.conf"] if venv.startswith("/") else []
        pip += [f"{home}/.config/pip/pip.conf", f"{home}/.pip/pip.conf"] if home else []
        loaded.update(dict.fromkeys(pip, "pip"))
    if not env.get(UV_CONFIG_FILE) and not env.get("UV_NO_CONFIG"):
        uv = [*(f"{d}/uv/uv.toml" for d in system), "/etc/uv/uv.toml"]
        uv += [f"{home}/.config/uv/uv.toml"] if home else []
        loaded.update(dict.fromkeys(uv, "uv"))
    return loaded


def judge_auth(env: Mapping[str, str], labels: Mapping[str, str]) -> list[Finding]:
    """Whether the image's environment authenticates to its index as its label says."""
    mode = labels.get(image_labels.WHEEL_INDEX_AUTH) or "none"
    source = f"config:Labels/{image_labels.WHEEL_INDEX_AUTH}"
    on_path = AUTH_BIN in env.get("PATH", "").split(":")
    fixed = [name for name in CERT_VARIABLES if env.get(name)]

    def finding(status: str, path: str, reason: str) -> Finding:
        return Finding(status, "index-auth", path, reason, component="wheel_index_auth",
                       component_version=mode)

    if mode not in INDEX_AUTH_MODES:
        return [finding(VIOLATION, source, f"unknown authentication '{mode}' (expected one "
                        f"of: {', '.join(INDEX_AUTH_MODES)})")]
    if mode == "client-cert":
        problems = [finding(VIOLATION, f"config:Env/{name}", f"a fixed certificate in {name} "
                            "replaces the host's entitlement certificate (and a key file in "
                            "the image sits in a layer)") for name in fixed]
        if not on_path:
            problems.append(finding(VIOLATION, "config:Env/PATH", f"{AUTH_BIN} is not on "
                                    "PATH: uv does not present the entitlement certificate"))
        return problems or [finding(OK, source, "pip and uv present the host's entitlement "
                                    "certificate")]
    if mode == "netrc":
        if not env.get("NETRC"):
            return [finding(VIOLATION, "config:Env/NETRC", "NETRC is not set: pip and uv do "
                            f"not read the netrc secret ({NETRC_SECRET})")]
        return [finding(OK, source, f"pip and uv read credentials from {env['NETRC']}")]
    # Declared unauthenticated: credentials presented anyway go to whoever serves the index.
    # (AUTH_BIN on PATH says nothing here: the uv entry point, which keeps uv to the image's
    # constraints, lives there in every image; it presents a certificate only through the
    # helper a client-cert image carries beside it.)
    presented = [f"config:Env/{name}" for name in fixed]
    presented += ["config:Env/NETRC"] if env.get("NETRC") else []
    return [finding(WARNING, path, "the image presents credentials (a client certificate or "
                    "a netrc file) to an index its labels declare unauthenticated")
            for path in presented]


def _may_be_config(path: str) -> bool:
    """Whether PATH holds a literal CONFIG_FILE cannot match without: a warm validation
    whose layers hold no config file compiles no pattern (issue 37)."""
    return "pip.conf" in path or "pip.ini" in path or "uv.toml" in path or \
        "aipcc-constraints.txt" in path


def _scanned_config_files(scans: Sequence[LayerScan], stack: Stack,
                          read_through: Sequence[LayerScan] = ()) -> set[str]:
    """The pip and uv config files the layer scans read that the final filesystem holds,
    and those read through links."""
    held = {path for number, scan in enumerate(scans) for path in scan.content_paths
            if _may_be_config(path) and CONFIG_FILE.search(path)
            and stack.hider(number, path) is None}
    return held | {path for scan in read_through for path in scan.content_paths}


def unread_named_files(image: PlatformImage, scans: Sequence[LayerScan], stack: Stack,
                       read_through: Sequence[LayerScan] = ()) -> list[str]:
    """The files PIP_CONFIG_FILE and UV_CONFIG_FILE name that the layer scans did not read
    (another name, a symlink, absent): `judge` needs them read from the layer stack."""
    named = named_files(image.env, image.working_dir)
    held = _scanned_config_files(scans, stack, read_through) if named else set()
    return sorted({path for _, path in named if path not in held})


def named_file_checks(variable: str, path: str, read: FileRead, expected: Expectation,
                       index: Optional[str]) -> list[Finding]:
    """A named file read on demand, judged as the scanned ones; one the tool cannot open
    fails the image when uv refuses to run without it, and warns when pip ignores it."""
    named = f"{variable} names this file" + (
        f", a symlink to {read.path}" if read.path != path else "")
    if read.text is not None:
        settings, problem = settings_from_text(path, read.text, variable == UV_CONFIG_FILE)
        findings = [replace(f, reason=f"{f.reason}; {named}") for f in judge_settings(
            [(setting, read.layer) for setting in settings], expected, index)]
        if problem:
            tool = "uv" if variable == UV_CONFIG_FILE else "pip"
            findings.append(Finding(VIOLATION, "index-config", path,
                                    f"{problem}; {named}: {TOOL_STOPS[tool]}",
                                    component=variable, layer_digest=read.layer))
        return findings
    if read.error is not None:
        return []  # the verdict is "unreadable"
    if read.over_limit:
        tool = "uv" if variable == UV_CONFIG_FILE else "pip"
        return [Finding(VIOLATION, "index-config", path,
                        f"{read.problem}; {named}: {UNJUDGED_SETTINGS[tool]}",
                        component=variable, layer_digest=read.layer)]
    held = f"{variable} names {path}, which the image does not hold as a file " \
           f"({read.problem})"
    if variable == UV_CONFIG_FILE:
        return [Finding(VIOLATION, "index-config", f"config:Env/{variable}",
                        f"{held}: uv fails every command (it cannot open its config file)",
                        component=variable, component_version=path)]
    return [Finding(WARNING, "index-config", f"config:Env/{variable}",
                    f"{held}: pip ignores it, so the indexes it was meant to set are not used",
                    component=variable, component_version=path)]


def index_checks(image: PlatformImage, scans: Sequence[LayerScan], stack: Stack,
                 expected: Expectation, reads: Mapping[str, FileRead],
                 read_through: Sequence[LayerScan] = ()) -> list[Finding]:
    """The indexes the image's pip and uv are told to use: its variables, the config files
    left in its final filesystem STACK (a later copy of a file replaces the earlier one),
    those read through links (READ_THROUGH), and the files its variables name under other
    names (READS)."""
    settings: list[tuple[IndexSetting, Optional[str]]] = [
        (setting, None) for setting in settings_from_env(image.env)]
    for number, scan in enumerate(scans):
        for setting in scan.index_settings:
            if stack.hider(number, setting.source) is None:
                settings.append((setting, scan.digest))
    for scan in read_through:
        settings.extend((setting, scan.digest) for setting in scan.index_settings)
    constraints = [(s, d) for s, d in settings if s.key == CONSTRAINTS_KEY]
    settings = [(s, d) for s, d in settings if s.key != CONSTRAINTS_KEY]
    index = expected.index or image.labels.get(image_labels.WHEEL_INDEX) or None
    findings = judge_settings(settings, expected, index)
    findings += judge_constraints(constraints, image.env, image.labels, expected)
    held = _scanned_config_files(scans, stack, read_through)
    for variable, path in named_files(image.env, image.working_dir):
        if path not in held:
            findings.extend(named_file_checks(variable, path, reads[path], expected, index))
    return findings + judge_auth(image.env, image.labels)
