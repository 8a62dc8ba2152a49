"""`validate --requirements`: the readers of pip's report, pylock.toml and uv.lock, the
resolution of a requirements file (through the runner), and the verdict naming the
requirement that brings a distribution of another release. Real pip reports resolved from
PyPI are judged in tests/integration/test_requirements.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from aipcc_build.errors import InputError
from aipcc_build.tools.runner import Completed
from aipcc_build.validate.requirements import (
    RequirementsRequest,
    check_requirements,
    read_resolved,
)
from aipcc_build.validate.results import Expectation

CUDA128 = Expectation("cuda", "12.8", source="argument")


def report(*entries: tuple[str, str, bool, list[str]]) -> dict[str, Any]:
    return {"version": "1", "install": [
        {"requested": requested, "metadata": {"name": name, "version": version,
                                              "requires_dist": requires}}
        for name, version, requested, requires in entries]}


VLLM_FOR_129 = report(
    ("vllm", "0.10.0", True, ["torch==2.8.0+cu129", "numpy"]),
    ("torch", "2.8.0+cu129", False, ["nvidia-cuda-runtime-cu12==12.9.79; platform_system == "
                                     '"Linux"', "pytest; extra == \"test\""]),
    ("nvidia-cuda-runtime-cu12", "12.9.79", False, []),
    ("numpy", "2.3.0", False, []),
    ("requests", "2.32.0", True, []))


def test_a_pip_report_names_the_requirement_that_brings_another_release(
        tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(VLLM_FOR_129))
    verdict = check_requirements(RequirementsRequest(path, CUDA128))
    assert not verdict.ok and len(verdict.distributions) == 5
    bad = {(f.component, f.component_version, f.reason) for f in verdict.findings
           if f.status == "violation"}
    assert ("nvidia-cuda-runtime-cu12", "12.9.79",
            "cuda 12.9 in a cuda 12.8 image; brought by vllm") in bad
    assert any(c == "torch" and "brought by vllm" in r for c, _, r in bad)
    assert check_requirements(RequirementsRequest(path, Expectation("cuda", "12.9"))).ok


def test_pylock_and_uv_lock_are_read(tmp_path: Path) -> None:
    pylock = tmp_path / "pylock.toml"
    pylock.write_text('lock-version = "1.0"\n[[packages]]\nname = "nvidia_cuda_runtime"\n'
                      'version = "13.0.88"\n[[packages]]\nname = "numpy"\nversion = "2.3.0"\n')
    found = read_resolved(pylock)
    assert found is not None and [(d.name, d.version) for d in found] == [
        ("nvidia-cuda-runtime", "13.0.88"), ("numpy", "2.3.0")]
    assert not check_requirements(RequirementsRequest(pylock, CUDA128)).ok
    uv_lock = tmp_path / "uv.lock"
    uv_lock.write_text(
        'version = 1\n[[package]]\nname = "app"\nversion = "0.1.0"\n'
        'source = { editable = "." }\ndependencies = [{ name = "cupy-cuda12x" }]\n'
        '[[package]]\nname = "cupy-cuda12x"\nversion = "13.6.0"\n'
        'dependencies = [{ name = "nvidia-cuda-runtime-cu12" }]\n'
        '[[package]]\nname = "nvidia-cuda-runtime-cu12"\nversion = "12.8.90"\n')
    verdict = check_requirements(RequirementsRequest(uv_lock, Expectation("cuda", "13.0")))
    bad = [(f.component, f.reason) for f in verdict.findings if f.status == "violation"]
    assert [name for name, _ in bad] == ["cupy-cuda12x", "nvidia-cuda-runtime-cu12"]
    assert bad[0][1].startswith("cuda 12 in a cuda 13.0 image")
    assert bad[1][1] == "cuda 12.8 in a cuda 13.0 image; brought by cupy-cuda12x"


class FakePip:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.argv: list[str] = []

    def run(self, argv: list[str], *, timeout: float = 0, check: bool = True,
            stdin: bytes | None = None, max_stdout: int = 0) -> Completed:
        self.argv = list(argv)
        return Completed(tuple(argv), 0, json.dumps(self.answer).encode(), b"")


def test_a_requirements_file_is_resolved_by_a_dry_run_of_pip(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("vllm\nrequests\n")
    pip = FakePip(VLLM_FOR_129)
    verdict = check_requirements(RequirementsRequest(path, CUDA128, "https://idx/simple/"),
                                 runner=pip)
    assert not verdict.ok
    assert pip.argv[4:] == ["-m", "pip", "install", "--dry-run", "--ignore-installed",
                            "--quiet", "--report", "-", "--requirement", str(path),
                            "--index-url", "https://idx/simple/"]


@pytest.mark.parametrize(("name", "text", "says"), [
    ("report.json", "{not json", "not JSON"),
    ("report.json", '{"version": "1"}', "not a pip installation report"),
    ("report.json", '{"install": [{"metadata": {"name": "x"}}]}', "install[0]"),
    ("uv.lock", "[[package]\n", "not TOML"),
    ("pylock.toml", "[[packages]]\nversion = '1'\n", "packages[0]"),
])
def test_malformed_input_names_the_file_and_field(tmp_path: Path, name: str, text: str,
                                                   says: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=re.escape(says)) as caught:
        read_resolved(path)
    assert caught.value.file == str(path)


def test_a_lock_entry_without_a_version_is_judged_by_its_archive_or_refused(
        tmp_path: Path) -> None:
    pylock = tmp_path / "pylock.toml"
    wheel = "nvidia_cuda_runtime_cu12-12.9.79-py3-none-manylinux2014_x86_64.whl"
    pylock.write_text('lock-version = "1.0"\n[[packages]]\nname = "nvidia-cuda-runtime-cu12"\n'
                      f'wheels = [{{ url = "https://files.example/x/{wheel}#sha256=00" }}]\n')
    verdict = check_requirements(RequirementsRequest(pylock, CUDA128))
    assert not verdict.ok
    assert [(f.component_version, f.status) for f in verdict.findings] == [
        ("12.9.79", "violation")]
    sdist = tmp_path / "sdist" / "pylock.toml"
    sdist.parent.mkdir()
    sdist.write_text('[[packages]]\nname = "nvidia-nvtx-cu12"\n'
                     'sdist = { path = "dist/nvidia_nvtx_cu12-12.8.90.tar.gz" }\n')
    found = read_resolved(sdist)
    assert found is not None and found[0].version == "12.8.90"
    # Nothing says the version (a directory, an archive of another name): refused.
    for name, entry in (("directory", 'directory = { path = "." }'),
                        ("other", 'wheels = [{ name = "other-1.0-py3-none-any.whl" }]')):
        refused = tmp_path / name / "pylock.toml"
        refused.parent.mkdir()
        refused.write_text(f'[[packages]]\nname = "nvidia-cuda-runtime-cu12"\n{entry}\n')
        with pytest.raises(InputError, match="has no version") as caught:
            read_resolved(refused)
        assert caught.value.field == "packages[0].version"
    uv_lock = tmp_path / "uv.lock"
    uv_lock.write_text('version = 1\n[[package]]\nname = "nvidia-cuda-runtime-cu12"\n'
                       f'wheels = [{{ url = "https://files.example/{wheel}" }}]\n')
    found = read_resolved(uv_lock)
    assert found is not None and found[0].version == "12.9.79"


def test_the_resolution_ignores_the_callers_constraints(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("vllm\n")
    pip = FakePip(VLLM_FOR_129)
    check_requirements(RequirementsRequest(path, CUDA128), runner=pip)
    # Empty variables: they override pip.conf's `constraint` as well as the caller's own.
    assert pip.argv[:3] == ["env", "PIP_CONSTRAINT=", "PIP_BUILD_CONSTRAINT="]


@pytest.mark.parametrize("text, line", [
    ("x" * 10_000_000, 1),  # ten megabytes without a newline
    ("numpy\n" + "y" * 70_000 + "\nrequests\n", 2),
])
def test_a_line_longer_than_any_requirement_is_refused_before_pip_runs(
        tmp_path: Path, text: str, line: int) -> None:
    """pip looked the 10 MB line up as a name on the index (half a minute, half a
    gigabyte) and its error, echoed whole, held the line several times over."""
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    pip = FakePip(VLLM_FOR_129)
    with pytest.raises(InputError, match="no requirement is longer than") as caught:
        check_requirements(RequirementsRequest(path, CUDA128, None), runner=pip)
    assert (caught.value.file, caught.value.line) == (str(path), line)
    assert len(str(caught.value)) < 200
    assert pip.argv == []  # pip never ran


def test_a_long_line_within_the_bound_goes_to_pip(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("vllm " + " ".join(["--hash=sha256:" + "0" * 64] * 100) + "\n")
    pip = FakePip(VLLM_FOR_129)
    check_requirements(RequirementsRequest(path, CUDA128, None), runner=pip)
    assert pip.argv
