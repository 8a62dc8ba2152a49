"""The constraints every image carries: generated from the component table, read by pip and
uv (the real programs' refusals are in tests/integration/test_constraints.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from aipcc_build.render.containerfiles import image_files, tool_config
from aipcc_build.toolkit.constraints import (
    CONSTRAINTS_PATH,
    constraints_for,
    constraints_text,
    target_in,
    target_of,
)

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def admitted(target_release: str, accelerator: str = "cuda") -> dict[str, Requirement]:
    target = target_of(accelerator, target_release)
    return {c.project: Requirement(c.line()) for c in constraints_for(target)}


def admits(constraints: dict[str, Requirement], project: str, version: str) -> bool:
    found = constraints.get(project)
    return found is None or found.specifier.contains(version, prereleases=True)


def test_a_cuda_image_admits_its_minor_and_nothing_of_another_release() -> None:
    c128 = admitted("12.8.1")
    assert admits(c128, "nvidia-cuda-runtime-cu12", "12.8.90")  # torch 2.8.0's pin
    assert admits(c128, "nvidia-cuda-runtime-cu12", "12.8.57")  # 12.8.0's
    assert not admits(c128, "nvidia-cuda-runtime-cu12", "12.9.79")
    assert not admits(c128, "nvidia-cuda-runtime-cu12", "12.6.77")
    # Components on exact versions: those the table's 12.8 patch releases pin, and a wheel
    # that appends a part to one.
    assert admits(c128, "nvidia-cufft-cu12", "11.3.3.83")
    assert admits(c128, "nvidia-cufile-cu12", "1.13.1.3")
    assert admits(c128, "nvidia-cufft-cu12", "11.3.3.83.1")
    assert not admits(c128, "nvidia-cufft-cu12", "11.4.1.4")  # CUDA 12.9's
    # Another major's names, whatever the version.
    assert not admits(c128, "nvidia-cuda-runtime", "13.0.88")
    assert not admits(c128, "nvidia-cudnn-cu13", "9.13.0.50")
    assert not admits(c128, "nvidia-cuda-runtime-cu11", "11.8.89")
    assert not admits(c128, "jax-cuda13-plugin", "0.7.2")
    assert not admits(c128, "jax-rocm7-plugin", "0.7.1")
    # Own numbering under the image's major: free.
    assert admits(c128, "nvidia-cudnn-cu12", "9.10.2.21")
    assert admits(c128, "nvidia-nccl-cu12", "2.27.3")
    assert admits(c128, "torch", "2.8.0")


def test_a_cuda_13_image_uses_the_unsuffixed_names() -> None:
    c130 = admitted("13.0.1")
    assert admits(c130, "nvidia-cuda-runtime", "13.0.88")
    assert not admits(c130, "nvidia-cuda-runtime", "13.1.80")
    assert not admits(c130, "nvidia-cuda-runtime-cu12", "12.8.90")
    assert not admits(c130, "nvidia-cudnn-cu12", "9.10.2.21")
    assert admits(c130, "nvidia-cudnn-cu13", "9.13.0.50")


def test_rocm_and_cpu_images_keep_other_accelerators_out() -> None:
    rocm = admitted("6.4.1", "rocm")
    assert not admits(rocm, "nvidia-cuda-runtime-cu12", "12.8.90")
    assert not admits(rocm, "jax-rocm7-plugin", "0.7.1")
    assert admits(rocm, "jax-rocm60-plugin", "0.6.0")
    cpu = {c.project: Requirement(c.line()) for c in constraints_for(target_of("cpu", None))}
    for project in ("nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12", "nvidia-cuda-runtime",
                    "jax-rocm7-plugin", "onnxruntime-rocm", "jax-cuda12-plugin",
                    "pytorch-triton-rocm"):
        assert not admits(cpu, project, "1.0"), project


def test_the_file_says_why_how_to_override_and_what_it_is_for() -> None:
    text = constraints_text(target_of("cuda", "12.9.1"))
    assert text.startswith("# aipcc-build constraints: cuda 12.9\n")
    assert "PIP_CONSTRAINT=/dev/null pip install" in text
    assert "UV_CONSTRAINT=/dev/null UV_CONFIG_FILE=/dev/null uv pip install" in text
    assert target_in(text) == target_of("cuda", "12.9.1")
    assert target_in("nvidia-cuda-runtime-cu12==12.8.*\n") is None
    # Every refusal names the image's release and this file (pip prints the whole line).
    for constraint in constraints_for(target_of("cuda", "12.9.1")):
        assert "cuda12.9" in constraint.specifier
        assert "see.etc.aipcc.constraints.txt" in constraint.specifier


def test_a_limiting_lines_label_splits_its_range_at_the_lowest_version() -> None:
    """uv prints the range a constraint keeps, not the line: the never-met clause must lie
    inside that range (at its lowest version, where no real wheel is missed) or uv drops
    it, and with it the release and the file, from its message."""
    for constraint in constraints_for(target_of("cuda", "12.8.1")):
        if constraint.why not in ("release-numbered", "exact"):
            continue
        spec = SpecifierSet(constraint.specifier)
        hole = next(s.version for s in spec if s.operator == "!=")
        lowest, label = hole.split("+")
        assert label == "cuda12.8.image.see.etc.aipcc.constraints.txt"
        assert Version(lowest) in spec, constraint  # the release itself stays admitted
        assert not spec.contains(hole), constraint
        bounds = [s for s in spec if s.operator in ("==", ">=")]
        assert bounds and bounds[0].version.rstrip(".*") == lowest, constraint


def test_every_excluded_jax_plugin_is_a_name_pypi_has() -> None:
    """jax-rocm6-* never existed (ROCm 6.0's plugins are jax-rocm60-*): a line for it cost
    pip time for nothing."""
    names = {c.project for c in constraints_for(target_of("cpu", None))}
    assert {n for n in names if n.startswith("jax-rocm")} == {
        "jax-rocm60-plugin", "jax-rocm60-pjrt", "jax-rocm7-plugin", "jax-rocm7-pjrt"}


def test_a_release_the_table_does_not_know_limits_its_release_numbered_components() -> None:
    c1210 = admitted("12.10.1")
    assert admits(c1210, "nvidia-cuda-runtime-cu12", "12.10.37")
    assert not admits(c1210, "nvidia-cuda-runtime-cu12", "12.9.79")
    assert "nvidia-cufft-cu12" not in c1210  # exact versions: unknown, left free
    assert not admits(c1210, "nvidia-cuda-runtime", "13.0.88")


@pytest.mark.parametrize("url", [None, "https://idx.example/3.0/cuda12.8-el9.6/simple/%41"])
def test_the_copied_files_are_what_pip_and_uv_parse(url: str) -> None:
    target = target_of("cuda", "12.8.1")
    files = image_files(url, target)
    lines = tool_config(url, target).splitlines()
    copied = {f"{line.split()[-1]}{name.split('/')[-1]}" for line in lines
              if line.startswith("COPY ") for name in line.split()[2:-1]}
    assert copied == set(files)
    assert files[CONSTRAINTS_PATH] == constraints_text(target)
    import configparser

    pip = configparser.RawConfigParser()
    pip.read_string(files["/etc/pip.conf"])
    assert pip.get("global", "constraint") == CONSTRAINTS_PATH
    assert pip.get("global", "index-url", fallback=None) == url
    uv = tomllib.loads(files["/etc/uv/uv.toml"])
    assert uv["constraint-dependencies"] == [c.line() for c in constraints_for(target)]
    assert uv["build-constraint-dependencies"] == uv["constraint-dependencies"]
    assert uv.get("index-url") == url


def test_a_components_name_says_its_major() -> None:
    from aipcc_build.toolkit.constraints import majors_named

    assert majors_named("nvidia-cuda-runtime") == ("13",)
    assert majors_named("nvidia_cudnn_cu12") == ("12",)
    assert majors_named("nvidia-cuda-runtime-cu11") == ("11",)
    assert majors_named("torch") == ()


@pytest.mark.parametrize("matrix_file", ["aipcc.yaml", "demo.yaml", "ci.yaml"])
def test_every_shipped_image_carries_the_constraints_of_its_own_release(
        matrix_file: str) -> None:
    from aipcc_build.matrix import load
    from aipcc_build.render import render_all

    repo = Path(__file__).resolve().parents[3]
    for item in render_all(load(repo / "matrix" / matrix_file)):
        target = target_of(item.image.accelerator, item.image.version)
        assert f"ENV PIP_CONSTRAINT={CONSTRAINTS_PATH}" in item.text, item.path
        assert f'ai.aipcc.constraints="{CONSTRAINTS_PATH}"' in item.text, item.path
        if item.image.from_kind is None:  # a child inherits its parent's file
            assert item.files["aipcc-constraints.txt"].startswith(
                f"# aipcc-build constraints: {target}\n"), item.path


def test_components_on_their_own_numbering_are_named_as_their_projects_are() -> None:
    # The table's sources name the CUDA 12 builds; other majors follow the same pattern.
    c130 = admitted("13.0.1")
    for project in ("cutensor-cu12", "nvidia-dali-cuda120", "nvidia-nccl-cu12"):
        assert not admits(c130, project, "1.0"), project
    assert admits(c130, "cutensor-cu13", "2.3.0") and admits(c130, "nvidia-dali-cuda130", "1.0")
    assert "nvidia-dali-cu12" not in admitted("12.8.1")  # no such project
