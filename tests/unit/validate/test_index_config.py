"""The validator reads the wheel indexes an image's pip and uv use (variables and config
files) and fails one that belongs to another toolkit; a foreign extra index is a warning."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import pytest

from aipcc_build.imagefs.lookup import FileRead
from aipcc_build.validate import validate_image
from aipcc_build.validate.index_config import (
    files_the_tools_load,
    settings_from_env,
    settings_from_text,
    toolkit_of,
)
from aipcc_build.validate.results import Expectation, ImageVerdict, IndexSetting
from aipcc_build.validate.verdict import judge
from tests.support.layers import member, oci_layout, tar_bytes
from tests.unit.validate.test_validate_units import image, scan

RHAI = "https://packages.redhat.com/api/pypi/public-rhai/rhoai/3.0/"
OURS = RHAI + "cuda12.8-ubi9/simple/"
THEIRS = RHAI + "cuda12.9-ubi9/simple/"


@pytest.mark.parametrize("url, claim", [
    (OURS, ("cuda", "12.8")),
    (RHAI + "rocm6.4-ubi9/simple/", ("rocm", "6.4")),
    (RHAI + "cpu-ubi9/simple/", ("cpu", None)),
    (RHAI.replace("3.0", "3.0") + "cuda-ubi9/simple/", ("cuda", None)),
    ("https://download.pytorch.org/whl/cu129", ("cuda", "12.9")),
    ("https://download.pytorch.org/whl/rocm6.3", ("rocm", "6.3")),
    ("https://mirror.example/cuda/12.8/simple/", ("cuda", "12.8")),
    ("https://pypi.org/simple/", None),
    ("https://cuda12.9.example/simple/", None),  # the host says nothing
])
def test_what_an_index_url_says(url: str, claim: tuple[str, str | None] | None) -> None:
    assert toolkit_of(url) == claim


def test_pip_and_uv_files_and_variables_are_read() -> None:
    pip, problem = settings_from_text(
        "/etc/pip.conf", "[global]\nindex-url = https://a/\nextra_index_url = https://b/\n"
        "  https://c/\n[install]\nfind-links = /wheels\ntimeout = 5\n", False)
    assert problem is None
    assert [(s.key, s.url) for s in pip] == [
        ("global.index-url", "https://a/"), ("global.extra-index-url", "https://b/"),
        ("global.extra-index-url", "https://c/"), ("install.find-links", "/wheels")]
    uv, _ = settings_from_text("/etc/uv/uv.toml", 'index-url = "https://a/"\n'
                               'extra-index-url = ["https://b/"]\n[[index]]\nurl = "https://d/"'
                               '\ndefault = true\n[pip]\nfind-links = ["https://e/"]\n', True)
    assert [(s.key, s.url) for s in uv] == [
        ("index-url", "https://a/"), ("extra-index-url", "https://b/"),
        ("pip.find-links", "https://e/"), ("index.default", "https://d/")]
    assert settings_from_text("/x/uv.toml", "index-url = [", True)[1].startswith("cannot parse")
    env = settings_from_env({"PIP_INDEX_URL": "https://a/", "UV_INDEX": "ours=https://b/ https://c/",
                             "PIP_EXTRA_INDEX_URL": " ", "HOME": "/root"})
    assert env == [IndexSetting("config:Env/PIP_INDEX_URL", "PIP_INDEX_URL", "https://a/"),
                   IndexSetting("config:Env/UV_INDEX", "UV_INDEX", "https://b/"),
                   IndexSetting("config:Env/UV_INDEX", "UV_INDEX", "https://c/")]


def config_layer(tmp_path: Path, name: str, files: dict[str, str]) -> object:
    return scan(tmp_path, tar_bytes([member(path, text.encode())
                                     for path, text in files.items()]), name)


def test_a_cuda129_index_fails_a_cuda128_image_naming_variable_and_file(tmp_path: Path) -> None:
    layer = config_layer(tmp_path, "conf", {
        "etc/pip.conf": f"[global]\nindex-url = {THEIRS}\n",
        "etc/uv/uv.toml": f'index-url = "{OURS}"\n',
        "opt/venv/pip.conf": "[global]\nextra-index-url = https://pypi.org/simple/\n"})
    env = {"PIP_INDEX_URL": THEIRS, "UV_DEFAULT_INDEX": OURS,
           "PIP_CONFIG_FILE": "/etc/pip.conf", "UV_CONFIG_FILE": "/etc/uv/uv.toml"}
    verdict = judge(ref="ref", image=image(env), scans=[layer],
                    expect=Expectation("cuda", "12.8.1"))
    assert verdict.verdict == "failed"
    index = {(f.status, f.path) for f in verdict.findings if f.evidence == "index-config"}
    assert index == {("violation", "config:Env/PIP_INDEX_URL"), ("violation", "/etc/pip.conf"),
                     ("ok", "config:Env/UV_DEFAULT_INDEX"), ("ok", "/etc/uv/uv.toml"),
                     ("warning", "/opt/venv/pip.conf")}
    line = next(f.line() for f in verdict.findings if f.path == "/etc/pip.conf")
    assert "global.index-url" in line and "cuda 12.9 wheels, in a cuda 12.8 image" in line


def test_the_labelled_index_is_the_images_own(tmp_path: Path) -> None:
    url = "http://127.0.0.1:8580/1.0/cpu-debian/simple/"
    labels = {"ai.aipcc.accelerator": "cpu", "ai.aipcc.wheel-index": url}
    verdict = judge(ref="ref", image=image({"PIP_INDEX_URL": url}, labels), scans=[])
    assert verdict.ok and [f.reason for f in verdict.findings] == [
        "the index serves cpu wheels (the image's own index)"]
    mirror = "https://mirror.example/ours/"
    labels["ai.aipcc.wheel-index"] = mirror
    verdict = judge(ref="ref", image=image({"PIP_INDEX_URL": mirror}, labels), scans=[])
    assert verdict.ok and verdict.findings[0].reason.endswith("the image's own index")
    rocm = judge(ref="ref", image=image({"UV_INDEX_URL": RHAI + "rocm6.4-ubi9/simple/"}, labels),
                 scans=[])
    assert not rocm.ok and f"(the image's index is {mirror})" in rocm.findings[0].reason
    # A labelled index of another toolkit is not excused by its label.
    labels["ai.aipcc.wheel-index"] = THEIRS
    wrong = judge(ref="ref",
                  image=image({"PIP_INDEX_URL": THEIRS}, {**labels, "ai.aipcc.accelerator":
                                                           "cuda"}), scans=[],
                  expect=Expectation("cuda", "12.8"))
    assert not wrong.ok


def test_a_later_layer_replaces_or_removes_a_config_file(tmp_path: Path) -> None:
    wrong = f"[global]\nindex-url={THEIRS}\n"
    lower = config_layer(tmp_path, "lower", {"etc/pip.conf": wrong,
                                             "etc/xdg/pip/pip.conf": wrong})
    upper = scan(tmp_path, tar_bytes([member("etc/pip.conf", b"[global]\ntimeout = 3\n"),
                                      member("etc/xdg/pip/.wh.pip.conf")]), "upper")
    verdict = judge(ref="ref", image=image(), scans=[lower, upper],
                    expect=Expectation("cuda", "12.8"))
    assert verdict.ok and not [f for f in verdict.findings if f.evidence == "index-config"]


def index_findings(verdict: ImageVerdict) -> set[tuple[str, str]]:
    return {(f.status, f.path) for f in verdict.findings if f.evidence == "index-config"}


def test_a_file_pip_config_file_names_is_read_from_the_layer_stack(tmp_path: Path) -> None:
    base = tar_bytes([member("opt/conf/site-pip.ini", f"[global]\nindex-url = {OURS}\n"
                                                      .encode())])
    wrong = tar_bytes([member("opt/conf/site-pip.ini",
                              f"[global]\nindex-url = {THEIRS}\n[install]\n"
                              "extra-index-url = https://pypi.org/simple/\n".encode())])
    env = {"PIP_CONFIG_FILE": "/opt/conf/site-pip.ini"}
    ref = oci_layout(tmp_path / "wrong", [base, wrong], env)
    [verdict] = validate_image(ref, expect=Expectation("cuda", "12.8"),
                               cache_dir=tmp_path / "cache")
    assert verdict.verdict == "failed"
    assert index_findings(verdict) == {("violation", "/opt/conf/site-pip.ini"),
                                       ("warning", "/opt/conf/site-pip.ini")}
    bad = next(f for f in verdict.findings if f.status == "violation")
    assert bad.layer_digest == "sha256:" + hashlib.sha256(wrong).hexdigest()
    assert (bad.component, bad.component_version) == ("global.index-url", THEIRS)
    assert "cuda 12.9 wheels, in a cuda 12.8 image" in bad.reason
    assert "PIP_CONFIG_FILE names this file" in bad.line()
    # The lower layer's good copy alone passes; the read goes through the same cache.
    good = oci_layout(tmp_path / "good", [base], env)
    [verdict] = validate_image(good, expect=Expectation("cuda", "12.8"),
                               cache_dir=tmp_path / "cache")
    assert verdict.ok and index_findings(verdict) == {("ok", "/opt/conf/site-pip.ini")}


def test_the_syntax_follows_the_variable_and_relative_names_the_working_dir(
        tmp_path: Path) -> None:
    layer = tar_bytes([member("etc/uv/settings", f'index-url = "{THEIRS}"\n'.encode()),
                       member("app/pip.toml", f"[global]\nindex-url = {OURS}\n".encode())])
    ref = oci_layout(tmp_path / "image", [layer], {"UV_CONFIG_FILE": "/etc/uv//./settings",
                                                  "PIP_CONFIG_FILE": "pip.toml"}, "/app")
    [verdict] = validate_image(ref, expect=Expectation("cuda", "12.8"),
                               cache_dir=tmp_path / "cache")
    assert index_findings(verdict) == {("violation", "/etc/uv/settings"),
                                       ("ok", "/app/pip.toml")}
    uv, pip = (next(f.reason for f in verdict.findings if f.path == path)
               for path in ("/etc/uv/settings", "/app/pip.toml"))
    assert uv == ("the index serves cuda 12.9 wheels, in a cuda 12.8 image; UV_CONFIG_FILE "
                  "names this file")
    assert pip == "the index serves cuda 12.8 wheels; PIP_CONFIG_FILE names this file"


def test_a_named_file_the_image_lacks_warns_for_pip_and_fails_for_uv(tmp_path: Path) -> None:
    layer = tar_bytes([member("etc/uv/settings.toml", kind=tarfile.DIRTYPE),
                       member("etc/pip.conf", b"[global]\ntimeout = 5\n")])
    ref = oci_layout(tmp_path / "image", [layer], {
        "PIP_CONFIG_FILE": "/etc/aipcc/pip-settings", "UV_CONFIG_FILE": "/etc/uv/settings.toml"})
    [verdict] = validate_image(ref, expect=Expectation("cuda", "12.8"),
                               cache_dir=tmp_path / "cache")
    assert verdict.verdict == "failed"
    assert index_findings(verdict) == {("warning", "config:Env/PIP_CONFIG_FILE"),
                                       ("violation", "config:Env/UV_CONFIG_FILE")}
    pip, uv = (f.reason for f in verdict.findings if f.evidence == "index-config")
    assert pip.startswith("PIP_CONFIG_FILE names /etc/aipcc/pip-settings, which the image "
                          "does not hold as a file (no such file): pip ignores it")
    assert "(a directory): uv fails every command" in uv


def test_standard_named_files_need_no_second_read(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from aipcc_build.imagefs import lookup

    def refused(*args: object) -> None:
        raise AssertionError("a second read for files the layer scans read")

    monkeypatch.setattr(lookup, "read_path", refused)
    layer = tar_bytes([member("etc/pip.conf", f"[global]\nindex-url = {OURS}\n".encode()),
                       member("etc/uv/uv.toml", f'index-url = "{OURS}"\n'.encode())])
    ref = oci_layout(tmp_path / "image", [layer], {"PIP_CONFIG_FILE": "/etc/pip.conf",
                                                  "UV_CONFIG_FILE": "/etc/uv/uv.toml"})
    for _ in range(2):  # cold, then from the cache
        [verdict] = validate_image(ref, expect=Expectation("cuda", "12.8"),
                                   cache_dir=tmp_path / "cache")
        assert verdict.ok and index_findings(verdict) == {("ok", "/etc/pip.conf"),
                                                          ("ok", "/etc/uv/uv.toml")}


def test_a_named_file_that_cannot_be_judged_says_why() -> None:
    path = "/opt/conf/site-pip.ini"
    env = {"PIP_CONFIG_FILE": path}

    def verdict(read: FileRead) -> ImageVerdict:
        return judge(ref="ref", image=image(env), scans=[], expect=Expectation("cuda", "12.8"),
                     reads={path: read})

    linked = verdict(FileRead("/srv/real.ini", "sha256:1", f"[global]\nindex-url={OURS}\n"))
    assert linked.ok and linked.findings[-1].reason.endswith(
        "PIP_CONFIG_FILE names this file, a symlink to /srv/real.ini")
    broken = verdict(FileRead(path, "sha256:1", "[global"))
    assert not broken.ok and broken.findings[-1].status == "violation"
    assert broken.findings[-1].reason.startswith("cannot parse")
    assert broken.findings[-1].reason.endswith(
        "pip cannot load it, so every pip command in the image fails")
    big = verdict(FileRead(path, "sha256:1", problem="2000000 bytes, more than 1048576: "
                                                     "not read", over_limit=True))
    assert not big.ok and big.findings[-1].layer_digest == "sha256:1"  # fails closed
    assert big.findings[-1].reason.endswith(
        "not read; PIP_CONFIG_FILE names this file: pip loads it, so the indexes it sets "
        "were not judged")
    directory = verdict(FileRead(path, "sha256:1", problem="a directory"))
    assert directory.ok and directory.findings[-1].reason.endswith(
        "which the image does not hold as a file (a directory): pip ignores it, so the "
        "indexes it was meant to set are not used")
    unreadable = verdict(FileRead(path, error="layer sha256:1 is unreadable: truncated"))
    assert unreadable.verdict == "unreadable" and unreadable.error == \
        "layer sha256:1 is unreadable: truncated"


def test_a_config_file_pip_or_uv_loads_fails_the_image_when_it_does_not_parse(
        tmp_path: Path) -> None:
    broken = "[global\nindex-url = x\n"
    lower = config_layer(tmp_path, "lower", {
        "etc/pip.conf": broken,                       # pip loads it: the image's pip is broken
        "usr/share/doc/tool/examples/pip.conf": broken,  # nobody loads it
        "etc/xdg/pip/pip.conf": broken,               # replaced by the upper layer's copy
        "etc/uv/uv.toml": "index-url = [\n"})          # uv loads it, unless UV_CONFIG_FILE
    upper = config_layer(tmp_path, "upper", {"etc/xdg/pip/pip.conf": "[global]\ntimeout = 3\n"})
    verdict = judge(ref="ref", image=image({"VIRTUAL_ENV": "/opt/venv"}), scans=[lower, upper],
                    expect=Expectation("cuda", "12.8"))
    unparsable = {(f.status, f.path) for f in verdict.findings
                  if f.component == "unparsable-file"}
    assert unparsable == {("violation", "/etc/pip.conf"), ("violation", "/etc/uv/uv.toml"),
                          ("warning", "/usr/share/doc/tool/examples/pip.conf"),
                          ("warning", "/etc/xdg/pip/pip.conf")}
    line = next(f.line() for f in verdict.findings if f.path == "/etc/uv/uv.toml")
    assert "uv cannot load it, so every uv command in the image fails" in line
    own_file = judge(ref="ref", image=image({"UV_CONFIG_FILE": "/opt/uv.toml"}), scans=[lower],
                     expect=Expectation("cuda", "12.8"), reads={"/opt/uv.toml": FileRead(
                         "/opt/uv.toml", "sha256:1", f'index-url = "{OURS}"\n')})
    assert ("warning", "/etc/uv/uv.toml") in {
        (f.status, f.path) for f in own_file.findings if f.component == "unparsable-file"}


def test_which_files_pip_and_uv_load() -> None:
    assert files_the_tools_load({}) == {"/etc/xdg/pip/pip.conf": "pip", "/etc/pip.conf": "pip",
                                        "/etc/xdg/uv/uv.toml": "uv", "/etc/uv/uv.toml": "uv"}
    loaded = files_the_tools_load({"HOME": "/home/app", "VIRTUAL_ENV": "/opt/venv/",
                                   "XDG_CONFIG_DIRS": "/etc/xdg:/opt/xdg:relative",
                                   "UV_NO_CONFIG": "1"})
    assert loaded == {"/etc/xdg/pip/pip.conf": "pip", "/opt/xdg/pip/pip.conf": "pip",
                      "/etc/pip.conf": "pip", "/opt/venv/pip.conf": "pip",
                      "/home/app/.config/pip/pip.conf": "pip", "/home/app/.pip/pip.conf": "pip"}
    assert set(files_the_tools_load({"PIP_CONFIG_FILE": "/dev/null"}).values()) == {"uv"}


AUTH_INDEX = "https://idx.example/3.0/cpu-ubi9/simple/"


def auth_findings(env: dict[str, str], auth: str | None) -> list[tuple[str, str, str]]:
    labels = {"ai.aipcc.accelerator": "cpu", "ai.aipcc.wheel-index": AUTH_INDEX}
    if auth is not None:
        labels["ai.aipcc.wheel-index.auth"] = auth
    verdict = judge(ref="ref", image=image({"PIP_INDEX_URL": AUTH_INDEX, **env}, labels), scans=[])
    return [(f.status, f.path, f.reason) for f in verdict.findings
            if f.evidence == "index-auth"]


WRAPPER_PATH = "/usr/local/libexec/aipcc-build:/usr/bin:/bin"


def test_client_cert_needs_the_wrapper_on_path_and_no_fixed_certificate() -> None:
    assert [s for s, _, _ in auth_findings({"PATH": WRAPPER_PATH}, "client-cert")] == ["ok"]
    dropped = auth_findings({"PATH": "/opt/venv/bin:/usr/bin"}, "client-cert")
    assert [(s, p) for s, p, _ in dropped] == [("violation", "config:Env/PATH")]
    assert "uv does not present the entitlement certificate" in dropped[0][2]
    fixed = auth_findings({"PATH": WRAPPER_PATH, "SSL_CLIENT_CERT": "/etc/pki/my.pem"},
                          "client-cert")
    assert [(s, p) for s, p, _ in fixed] == [("violation", "config:Env/SSL_CLIENT_CERT")]
    assert "replaces the host's entitlement certificate" in fixed[0][2]


def test_netrc_needs_netrc_set() -> None:
    assert auth_findings({"NETRC": "/run/secrets/netrc"}, "netrc")[0][0] == "ok"
    assert auth_findings({}, "netrc") == [
        ("violation", "config:Env/NETRC",
         "NETRC is not set: pip and uv do not read the netrc secret (/run/secrets/netrc)")]


def test_credentials_for_an_index_declared_unauthenticated_are_a_warning() -> None:
    assert auth_findings({"PATH": "/usr/bin"}, None) == []
    found = auth_findings({"PATH": WRAPPER_PATH, "PIP_CLIENT_CERT": "/x.pem",
                           "NETRC": "/run/secrets/netrc"}, None)
    assert {(s, p) for s, p, _ in found} == {
        ("warning", "config:Env/PIP_CLIENT_CERT"), ("warning", "config:Env/NETRC")}
    assert all("declare unauthenticated" in reason for _, _, reason in found)


def test_the_uv_entry_point_on_path_is_no_credential() -> None:
    # Every rendered image puts the uv entry point's directory first on PATH (the demo's
    # validation warned on each of them before).
    assert auth_findings({"PATH": WRAPPER_PATH}, None) == []
    assert auth_findings({"PATH": WRAPPER_PATH}, "none") == []


def test_an_unknown_authentication_label_fails_the_image() -> None:
    found = auth_findings({}, "kerberos")
    assert [(s, p) for s, p, _ in found] == [
        ("violation", "config:Labels/ai.aipcc.wheel-index.auth")]
