"""No instruction of a shipped Containerfile is long: buildah prints each as one STEP line,
and a CI log that holds a 10 KB one buries the error of the step that failed (issue 38).
The files an image's configuration needs come in by COPY from the build context instead."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aipcc_build.matrix import load
from aipcc_build.render import render_all

REPO = Path(__file__).resolve().parents[3]
LONGEST = 600  # characters of one instruction, its continuation lines included
# The one value that is long by nature: NVIDIA's driver-branch clauses, which the NVIDIA
# container runtime reads from this one variable (several NVIDIA_REQUIRE_* variables would
# be ANDed, not ORed). The instruction around it is measured without it.
_REQUIRE_CUDA = re.compile(r'NVIDIA_REQUIRE_CUDA="[^"]*"')  # over its continuation lines
LONGEST_LINE = 200  # characters of one line of a shipped Containerfile


def instructions(text: str) -> list[str]:
    """TEXT's instructions, each with its continuation lines (comments left out)."""
    found: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current.append(line)
        if not line.endswith("\\"):
            found.append("\n".join(current))
            current = []
    if current:
        found.append("\n".join(current))
    return found


def test_instructions_are_split_with_their_continuation_lines() -> None:
    assert instructions("# c\nFROM x\n\nRUN a \\\n && b\nENV A=1 \\\n    B=2\n") == [
        "FROM x", "RUN a \\\n && b", "ENV A=1 \\\n    B=2"]


@pytest.mark.parametrize("matrix_file", ["aipcc.yaml", "demo.yaml", "ci.yaml"])
def test_no_instruction_of_a_shipped_containerfile_is_longer_than_a_few_hundred_characters(
        matrix_file: str) -> None:
    rendered = render_all(load(REPO / "matrix" / matrix_file))
    assert rendered
    for item in rendered:
        longest = max((_REQUIRE_CUDA.sub("NVIDIA_REQUIRE_CUDA=...", instruction)
                       for instruction in instructions(item.text)), key=len)
        assert len(longest) <= LONGEST, f"{item.path}: {longest[:200]}..."


@pytest.mark.parametrize("matrix_file", ["aipcc.yaml", "demo.yaml", "ci.yaml"])
def test_no_line_of_a_shipped_containerfile_is_long(matrix_file: str) -> None:
    for item in render_all(load(REPO / "matrix" / matrix_file)):
        longest = max(item.text.splitlines(), key=len)
        assert len(longest) <= LONGEST_LINE, f"{item.path}: {longest[:200]}..."


def test_the_driver_branch_clauses_are_continued_lines_the_engine_joins_back() -> None:
    from aipcc_build.toolkit.driver_branches import load_driver_branches

    text = (REPO / "containerfiles" / "builder" / "cuda-12.9-ubi9" / "Containerfile"
            ).read_text()
    value = _REQUIRE_CUDA.search(text)
    assert value is not None
    # The Dockerfile parser drops each backslash-newline and keeps the next line as it is.
    joined = value.group(0).replace("\\\n", "")
    assert joined == f'NVIDIA_REQUIRE_CUDA="{load_driver_branches().require_cuda("12.9")}"'
    assert max(len(line) for line in value.group(0).splitlines()) < 130
