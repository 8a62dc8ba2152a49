"""Issue 16.5: hostile input files end in exit 2 with a located message, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.project import Project


def run(cli, *args: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """Exit code and stderr, through the shared in-process CLI runner."""
    result = cli(*args)
    return result.code, result.err


def assert_located(code: int, err: str, file: Path, line: int | None = None) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert err.startswith("aipcc-build: error: "), err
    where = f"{file}:{line}:" if line is not None else str(file)
    assert where in err, err


def test_matrix_not_utf8(tmp_path: Path, cli) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_bytes(b"schema: 1\nproduct: {name: \xff}\n")
    assert_located(*run(cli, "--matrix", str(matrix), "list"), matrix, 2)


def test_matrix_nested_too_deeply(tmp_path: Path, cli) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    code, err = run(cli, "--matrix", str(matrix), "list")
    assert_located(code, err, matrix)
    assert "nested too deeply" in err


def test_matrix_tag_it_cannot_construct(project: Project, cli) -> None:
    project.edit("vars: {cudnn: 9.8.0.87}", "vars: {cudnn: !!python/object:os.system x}")
    code, err = run(cli, "--matrix", str(project.matrix), "render")
    assert_located(code, err, project.matrix, 12)
    assert "vars.cudnn" in err and "constructor" in err


def test_matrix_path_component_too_long(tmp_path: Path, cli) -> None:
    matrix = tmp_path / ("x" * 300) / "m.yaml"
    code, err = run(cli, "--matrix", str(matrix), "list")
    assert_located(code, err, matrix)


@pytest.mark.parametrize("content", [
    "[" * 100000 + "]" * 100000,
    '{"metadata": {"labels": [1, 2]}}',
    b"\xff\xfe{",
])
def test_select_node_hostile_files(project: Project, tmp_path: Path, cli,
                                   content: str | bytes) -> None:
    node = tmp_path / "node.json"
    if isinstance(content, bytes):
        node.write_bytes(content)
    else:
        node.write_text(content)
    assert_located(*run(cli, "--matrix", str(project.matrix), "select", "--node",
                        str(node)), node)


@pytest.mark.parametrize("command", [["matrix", "--dry-run", "--history"],
                                     ["compat", "--report"]])
def test_deep_json_reports(project: Project, tmp_path: Path, cli,
                           command: list[str]) -> None:
    report = tmp_path / "report.json"
    report.write_text("[" * 100000 + "]" * 100000)
    assert_located(*run(cli, "--matrix", str(project.matrix), *command, str(report)),
                   report)


# ---- fuzz: any bytes, any JSON: exit 0, 1 or 2, never a traceback ------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["schema", "images", "key", "name", "kind", "metadata",
                                       "labels", "status", "digest", "build_duration"])
                      | st.text(max_size=6), children, max_size=4),
    max_leaves=20)

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _exit(cli, *args: str) -> None:  # type: ignore[no-untyped-def]
    result = cli(*args)
    assert result.code in (0, 1, 2), (result.code, result.err)
    assert "Traceback" not in result.err


@FUZZ
@given(text=st.text(max_size=300) | st.binary(max_size=300))
def test_fuzz_matrix_loader(project: Project, cli, text: str | bytes) -> None:
    path = project.root / "fuzz.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8", "replace"))
    _exit(cli, "--matrix", str(path), "list")


@FUZZ
@given(value=json_values)
def test_fuzz_json_readers(project: Project, cli, value: object) -> None:
    path = project.root / "fuzz.json"
    path.write_text(json.dumps(value))
    _exit(cli, "--matrix", str(project.matrix), "matrix", "--dry-run", "--history",
          str(path))
    _exit(cli, "--matrix", str(project.matrix), "select", "--node", str(path))
    _exit(cli, "--matrix", str(project.matrix), "compat", "--report", str(path))


# ---- issue 16.8: render never overwrites a hand-written file nor leaves the output tree --

def test_render_refuses_to_overwrite_a_hand_written_file(project: Project, cli) -> None:
    assert run(cli, "--matrix", str(project.matrix), "render")[0] == 0
    target = project.output / "base" / "cuda-12.9-el9.6" / "Containerfile"
    assert target.exists()
    target.write_text("FROM scratch\n# my own work\n")
    code, err = run(cli, "--matrix", str(project.matrix), "render")
    assert_located(code, err, target)
    assert "generated header" in err
    assert target.read_text() == "FROM scratch\n# my own work\n"


def test_render_refuses_a_symlinked_kind_directory(project: Project, tmp_path: Path,
                                                   cli) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    project.output.mkdir()
    (project.output / "base").symlink_to(outside)
    code, err = run(cli, "--matrix", str(project.matrix), "render")
    assert_located(code, err, project.output / "base")
    assert "outside" in err
    assert list(outside.iterdir()) == []


# ---- issue 16.9: report paths are checked before the first build --------------------------

@pytest.mark.parametrize("option", ["--report", "--junit"])
def test_unwritable_report_paths_fail_before_any_build(project: Project, tmp_path: Path,
                                                       cli, monkeypatch, option: str) -> None:
    from aipcc_build.imagebuild import matrix_build

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("a build started")

    monkeypatch.setattr(matrix_build, "build_matrix", no_build)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, err = run(cli, "--matrix", str(project.matrix), "matrix", option,
                    str(blocker / "out.xml"))
    assert_located(code, err, blocker / "out.xml")
    assert option in err
