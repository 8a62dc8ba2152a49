"""The validator on the wheels people install (issues 21 and 29): the corpus of
tests/data/validator-corpus.yaml, real wheels from PyPI (whole, or their dist-info and the
members that matter, fetched by range requests) installed with real pip, and real Debian
packages installed with dpkg, into real Debian 12 images, each judged as a CPU image, a
CUDA 12.8 image and as the images of the other releases the entry lists."""

from __future__ import annotations

import fnmatch
import platform
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aipcc_build.validate import ImageVerdict, validate_image
from aipcc_build.validate.results import VIOLATION
from tests.support.artifacts import wheel
from tests.support.layers import CUDA128_ENV, CUDA128_LABELS, Images, Step
from tests.support.partial_wheels import debian_packages, partial_wheel
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
# Kinds of image an entry is judged as; "rocm-X.Y" and "cuda-X.Y" other than 12.8 are the
# CPU image labelled for that release.
LABELLED = re.compile(r"^(rocm|cuda)-(\d+\.\d+)$")
CASES = [(entry, kind) for entry in CORPUS["entries"] for kind in entry
         if kind in ("cpu", "cuda-12.8") or LABELLED.match(kind)]


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

    def cpu(entry: dict[str, Any]) -> str:
        if (entry["id"], "cpu") not in built:
            files = [wheel(corpus_wheels, *spec.split("==")) for spec in entry.get("wheels", ())]
            files += [partial_wheel(p["project"], str(p["version"]), p["tag"], p["members"])
                      for p in entry.get("partial", ())]
            script = [f"{PIP} " + " ".join(f"/wheels/{w.parent.name}/{w.name}" for w in files)]
            volumes = [(directory, f"/wheels/{directory.name}")
                       for directory in {w.parent for w in files}]
            if entry.get("debs"):
                debs = debian_packages(entry["debs"])
                names = " ".join(f"/debs/{name}_*.deb" for name in entry["debs"])
                script = [*script[:1 if files else 0], f"dpkg --force-depends -i {names}"]
                volumes.append((debs, "/debs"))
            if entry.get("then"):  # what a package does after its install (a bundled copy)
                script.append(entry["then"])
            built[(entry["id"], "cpu")] = images.build(f"corpus-{entry['id']}-cpu", venv, [Step(
                script=" && ".join(script), volumes=volumes,
                labels={"ai.aipcc.accelerator": "cpu"})])
        return built[(entry["id"], "cpu")]

    def image(entry: dict[str, Any], kind: str) -> str:
        key = (entry["id"], kind)
        if key not in built and kind == "cuda-12.8":
            built[key] = images.build(
                f"corpus-{entry['id']}-cuda128", cpu(entry), [Step(
                    script=f"{PIP} " + " ".join(f"/runtime/{w.name}" for w in runtime),
                    volumes=[(wheelhouse, "/runtime")], env=CUDA128_ENV,
                    labels=CUDA128_LABELS)])
        elif key not in built and kind != "cpu":
            family, release = LABELLED.match(kind).groups()  # type: ignore[union-attr]
            built[key] = images.build(
                f"corpus-{entry['id']}-{family}{release.replace('.', '')}", cpu(entry),
                [Step(labels={"ai.aipcc.accelerator": family,
                              "ai.aipcc.accelerator.version": release})])
        return cpu(entry) if kind == "cpu" else built[key]

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
