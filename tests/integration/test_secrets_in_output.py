"""Secrets fed through real programs' error paths never reach what a command prints or
writes: a buildah build whose RUN step prints an index URL with user and password and an
Authorization header, then fails (stdout, stderr, build report, JUnit file, build log); a
skopeo refusing a reference with a password (validate)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aipcc_build.matrix import load
from aipcc_build.render import apply, render_all

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SECRET = "Pa55-7zq1-SECRET"


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aipcc_build", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_failing_build_that_prints_secrets_leaves_them_nowhere(
        tmp_path: Path, unique_base: tuple[str, str]) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "app.j2").write_text(
        "FROM {{ os_from }}\n"
        f"RUN echo 'pip: GET https://reader:{SECRET}@idx.example/simple/ answered 401'; "
        f"echo 'Authorization: Bearer {SECRET}'; false\n")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "schema: 1\nproduct: {name: t, version: '1'}\ntemplates: templates\noutput: out\n"
        "registry: localhost/aipcc-test-secrets\n"
        f"os:\n  bb: {{from: {unique_base[0]}}}\naccelerators:\n  cpu: {{}}\n"
        "images:\n  app: {template: app.j2, os: [bb]}\n")
    loaded = load(matrix)
    apply(loaded, render_all(loaded), check=False, remove_stale=False)
    done = run(tmp_path, "--matrix", "matrix.yaml", "matrix", "--junit", "junit.xml",
               "--build-arg", f"INDEX_PASSWORD={SECRET}")
    assert done.returncode == 1, done.stderr
    assert "answered 401" in done.stderr  # the failure is shown, its secrets masked
    assert SECRET not in done.stdout + done.stderr
    written = [tmp_path / "build-report.json", tmp_path / "junit.xml",
               *(tmp_path / "logs").rglob("*.log")]
    assert len(written) == 3
    for path in written:
        assert SECRET not in path.read_text(), path
    assert "***@idx.example" in (tmp_path / "build-report.json").read_text()


def test_skopeo_refusing_a_reference_with_a_password(tmp_path: Path) -> None:
    done = run(tmp_path, "validate", f"docker://me:{SECRET}@127.0.0.1:9/ns/x:1", "--json")
    assert done.returncode == 2, done.stderr
    assert SECRET not in done.stdout + done.stderr
