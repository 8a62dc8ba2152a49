"""The validator on the wheels people install (issue 21): the corpus of
tests/data/validator-corpus.yaml, real wheels from PyPI installed with real pip into real
Debian 12 images, each judged as a CPU image and as a CUDA 12.8 image."""

from __future__ import annotations

import fnmatch
import platform
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aipcc_build.validate import ImageVerdict, validate_image
from aipcc_build.validate.results import VIOLATION
from tests.support.artifacts import wheel
from tests.support.layers import CUDA128_ENV, CUDA128_LABELS, Images, Step
from tests.support.project import REPO

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(platform.machine() != "x86_64",
                       reason="the corpus pins x86_64 wheels"),
]

CORPUS = yaml.safe_load((REPO / "tests" / "data" / "validator-corpus.yaml").read_text())
VENV = "/opt/venv"
SITE = f"{VENV}/lib/python3.11/site-packages"
# Debian's pip installs into the venv (PIP_PYTHON), as bench/validate_real.py does.
PIP = "pip install --quiet --no-deps --no-index --no-compile"
CASES = [(entry, kind) for entry in CORPUS["entries"] for kind in ("cpu", "cuda-12.8")]


@pytest.fixture(scope="session")
def corpus_wheels() -> Path:
    done = subprocess.run([str(REPO / "scripts" / "fetch-corpus-wheels")], check=True,
                          capture_output=True, text=True, timeout=1800)
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def corpus(debian_base: str, corpus_wheels: Path, wheelhouse: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Builds an entry's two images on first use: its wheels in a venv of the Debian base
    (the CPU image), then NVIDIA's CUDA 12.8 runtime and NVTX wheels on top."""
    images = Images()
    venv = images.build("corpus-venv", debian_base, [Step(
        script=f"python3 -m venv --without-pip {VENV}",
        env={"PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "PIP_PYTHON": f"{VENV}/bin/python", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})])
    runtime = [wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.8.90"),
               wheel(wheelhouse, "nvidia-nvtx-cu12", "12.8.90")]
    built: dict[tuple[str, str], str] = {}

    def image(entry: dict[str, Any], kind: str) -> str:
        key = (entry["id"], kind)
        if key not in built:
            files = [wheel(corpus_wheels, *spec.split("==")).name for spec in entry["wheels"]]
            cpu = images.build(f"corpus-{entry['id']}-cpu", venv, [Step(
                script=f"{PIP} "
                       + " ".join(f"/wheels/{name}" for name in files),
                volumes=[(corpus_wheels, "/wheels")],
                labels={"ai.aipcc.accelerator": "cpu"})])
            built[(entry["id"], "cpu")] = cpu
            built[(entry["id"], "cuda-12.8")] = images.build(
                f"corpus-{entry['id']}-cuda128", cpu, [Step(
                    script=f"{PIP} " + " ".join(f"/runtime/{w.name}" for w in runtime),
                    volumes=[(wheelhouse, "/runtime")], env=CUDA128_ENV,
                    labels=CUDA128_LABELS)])
        return built[key]

    try:
        yield image
    finally:
        images.remove_all()


@pytest.fixture(scope="session")
def corpus_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corpus-cache")


def _relative(path: str) -> str:
    return path.removeprefix(f"{SITE}/")


@pytest.mark.parametrize("entry, kind", CASES,
                         ids=[f"{entry['id']}-{kind}" for entry, kind in CASES])
def test_corpus_verdicts(corpus: Any, corpus_cache: Path, entry: dict[str, Any],
                         kind: str) -> None:
    expected = entry[kind]
    [verdict] = validate_image(f"containers-storage:{corpus(entry, kind)}",
                               cache_dir=corpus_cache)
    assert isinstance(verdict, ImageVerdict)
    violations = [f for f in verdict.findings if f.status == VIOLATION]
    shown = "\n".join(f.line() for f in verdict.findings if f.status != "ok")
    assert verdict.verdict == expected["verdict"], f"{expected['why']}\n{shown}"
    for pattern in expected.get("caught", ()):
        assert any(fnmatch.fnmatchcase(_relative(f.path), pattern) for f in violations), \
            f"{pattern} is not among the violations:\n{shown}"
    # Every finding on an installed file names the distribution that brought it.
    for finding in verdict.findings:
        if finding.path.startswith(f"{SITE}/") and ".dist-info" not in finding.path \
                and finding.status != "ok":
            assert finding.distribution, finding.line()
