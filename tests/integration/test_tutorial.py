"""docs/tutorial.md's `sh demo` blocks, run as written, in order, in a fresh git copy of
the project, on the demo's fixtures (the Debian base image, the wheel indexes on
127.0.0.1:8580, a registry namespace) in place of its set-up blocks. It builds one image
(`--only`, `--layers`), the demo's smallest CUDA one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_docs_commands import fresh_clone, shell
from tests.support.doc_blocks import runnable_blocks
from tests.support.project import REPO

pytestmark = pytest.mark.integration

TUTORIAL = REPO / "docs" / "tutorial.md"


def test_the_tutorial_runs_as_written(debian_base: str, wheel_index: Any, namespace: str,
                                      tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path / "clone")
    blocks = runnable_blocks(TUTORIAL, "demo")
    assert len(blocks) >= 5
    done = shell("\n".join(blocks), clone, REGISTRY=namespace)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    report = json.loads((clone / "build-report.json").read_text())
    built = {i["key"]: i["list_digest"] or i["digest"] for i in report["images"]}
    # The promoted tag holds the digest that was built (a list's when several platforms).
    assert built["base/cuda-12.9-debian"] in done.stdout
    assert "nvidia-cuda-runtime-cu12 12.9.79" in " ".join(done.stdout.split())
