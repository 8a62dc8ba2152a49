"""What the repository tracks: every CI job and every `git clone` of it copies it all."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The largest tracked file is a docs picture of about 120 kB; wheels and base-OS tarballs
# are fetched and cached by scripts/, never committed.
LIMIT = 512 * 1024


def test_no_large_file_is_tracked() -> None:
    # "<mode> blob <object> <size>\t<path>" for every file of the commit a clone checks out
    listed = subprocess.run(["git", "ls-tree", "-r", "-l", "-z", "HEAD"], cwd=REPO,
                            check=True, capture_output=True, timeout=60).stdout.decode()
    large = [entry.split("\t", 1)[1] for entry in listed.split("\0")
             if entry and entry.split()[3].isdigit() and int(entry.split()[3]) > LIMIT]
    assert large == []


# Issue 22.1: what a machine behind a TLS-intercepting proxy sets for the tools the suite
# runs (npm, node, pip, uv, git, curl, skopeo): tox must pass every one of them.
PROXY_AND_CA = ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
                "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT", "PIP_INDEX_URL",
                "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "UV_INDEX_URL", "UV_NATIVE_TLS",
                "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY",
                "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "npm_config_cafile",
                "npm_config_registry", "NPM_CONFIG_CAFILE", "NPM_CONFIG_REGISTRY")


def test_tox_passes_the_proxy_and_ca_settings() -> None:
    from tests.support.tox import tox_environment

    given = {name: f"value-of-{name}" for name in PROXY_AND_CA}
    passed = tox_environment(given)
    assert [name for name in PROXY_AND_CA if passed.get(name) != given[name]] == []


def test_every_file_the_package_reads_is_in_its_wheel() -> None:
    """tox and users install the wheel, not the tree: a data file the package reads (the
    image's uv entry point was one) must be named in pyproject's package-data."""
    import fnmatch
    import re

    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[tool.setuptools.package-data]", 1)[1]
    globs = re.findall(r'"([^"]+)"', re.search(r"^aipcc_build = \[(.*?)\]", section,
                                               re.M | re.S).group(1))
    tracked = subprocess.run(["git", "ls-files", "aipcc_build"], cwd=REPO, check=True,
                             capture_output=True, text=True, timeout=60).stdout.split()
    data = [path[len("aipcc_build/"):] for path in tracked if not path.endswith(".py")]
    assert data, "no data file found: the check checked nothing"
    assert [path for path in data if not any(fnmatch.fnmatch(path, g) for g in globs)] == []
