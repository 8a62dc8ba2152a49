"""The HTML page in a real browser: Debian's chromium, headless, no network."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from aipcc_build.cli import main

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "unit" / "compat" / "data"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--enable-logging=stderr", "--v=0"]


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("chromium is not installed: the README's test command installs it "
                    "(apt-get install chromium)")
    return found


@pytest.fixture
def page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "compat.html"
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", str(DATA / "matrix-13.yaml"), "compat", "--format", "html",
              "-o", str(path), "--today", "2025-09-01"])
    assert exit_.value.code == 0
    capsys.readouterr()
    return path


def _chromium(chromium: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    return subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=True)


def test_page_renders_the_grid_without_console_errors(chromium: str, page: Path,
                                                      tmp_path: Path) -> None:
    result = _chromium(chromium, tmp_path, "--dump-dom", page.as_uri())
    dom = result.stdout
    assert '<table id="compat-grid">' in dom
    rows = re.findall(r'<tr><th scope="row">([^<]+)', dom)  # the release, before its notes
    assert rows == ["cuda 13.0.2", "cuda 12.9.1", "cuda 12.8.1", "cuda 12.6.3", "rocm 6.4.1",
                    "cpu"]
    statuses = re.findall(r'data-status="([a-z-]+)"', dom)
    assert statuses.count("eol") == 1 and statuses.count("eol-soon") == 1
    assert "driver native &gt;= 580.95.05, compat &gt;= 580" in dom
    console = [line for line in result.stderr.splitlines()
               if "CONSOLE" in line or "Uncaught" in line or "ERR_" in line]
    assert console == []


def test_page_screenshot(chromium: str, page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "compat.png"
    _chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1600,900",
              "--hide-scrollbars", page.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
