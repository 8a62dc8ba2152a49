"""Issue 22: every command's path options, fuzzed. Whatever the path (too long a name, a
file where a directory is wanted, a dangling link, a device node, a leading '-', a line
break), a command ends with exit 0, 1 or 2 and never a traceback."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.filesystems import device_node
from tests.support.project import REPO
from tests.support.wheels import make_wheel

DEMO = str(REPO / "matrix" / "demo.yaml")
COMPONENTS = st.sampled_from(["a", "x" * 300, "..", ".", "file", "dir", "dangling", "null",
                              "-p", "--output=o", "new\nline", "sp ace", "ü", "w.whl",
                              "index.json", "~", "report.json"])
MOST_COMPONENTS = 4
PATHS = st.lists(COMPONENTS, min_size=1, max_size=MOST_COMPONENTS).map("/".join)
FUZZ = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

Command = Callable[[str], tuple[str, ...]]
COMMANDS: dict[str, Command] = {
    "--matrix": lambda p: ("--matrix", p, "list"),
    "matrix --report": lambda p: ("--matrix", DEMO, "matrix", "--report", p),
    "matrix --junit": lambda p: ("--matrix", DEMO, "matrix", "--junit", p),
    "matrix --history": lambda p: ("--matrix", DEMO, "matrix", "--dry-run", "--history", p),
    "compat -o": lambda p: ("--matrix", DEMO, "compat", "--format", "json", "-o", p),
    "compat --report": lambda p: ("--matrix", DEMO, "compat", "--report", p),
    "select --node": lambda p: ("--matrix", DEMO, "select", "--node", p),
    "validate oci:": lambda p: ("validate", f"oci:{p}"),
    "promote --report": lambda p: ("--matrix", DEMO, "promote", "--report", p, "--to",
                                   "127.0.0.1:9/r", "--dry-run"),
    "mirror --report": lambda p: ("--matrix", DEMO, "mirror", "--report", p, "--to",
                                  "dir:out", "--retries", "1"),
    "mirror --out": lambda p: ("--matrix", DEMO, "mirror", "--from", "dir:layout", "--to",
                               "docker://127.0.0.1:9/ns", "--out", p),
    "mirror --to dir:": lambda p: ("--matrix", DEMO, "mirror", "--from", "dir:layout", "--to",
                                   f"dir:{p}"),
    "mirror --to oci-archive:": lambda p: ("--matrix", DEMO, "mirror", "--from", "dir:layout",
                                           "--to", f"oci-archive:{p}"),
    "mirror --from dir:": lambda p: ("--matrix", DEMO, "mirror", "--from", f"dir:{p}",
                                     "--to", "dir:out"),
    "mirror --from oci-archive:": lambda p: ("--matrix", DEMO, "mirror", "--from",
                                             f"oci-archive:{p}", "--to", "dir:out"),
    "index ROOT": lambda p: ("--matrix", DEMO, "index", p, "cpu-debian=wheels"),
    "index VARIANT=DIR": lambda p: ("--matrix", DEMO, "index", "root", f"cpu-debian={p}"),
}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding what the fuzzed paths name: a file, a directory, a
    dangling link, a device node, an OCI layout, wheels. It lies as deep in the test's own
    directory as a fuzzed path has components: `../../../..` names that directory, never
    the machine's root (a directory of reports is searched throughout: a walk of every
    file on a shared machine took seconds and read what other runs were writing)."""
    from aipcc_build.imagebuild import matrix_build
    from aipcc_build.imagebuild.outcomes import RunResult

    def nothing_built(*args: object, **kwargs: object) -> RunResult:
        return RunResult(images=(), start=0.0, end=0.0)

    monkeypatch.setattr(matrix_build, "build_matrix", nothing_built)
    tmp_path = tmp_path.joinpath(*["deep"] * MOST_COMPONENTS)
    tmp_path.mkdir(parents=True)
    (tmp_path / "file").write_text("not json {")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "file").write_bytes(b"\0\1")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    device_node(tmp_path)
    layout = tmp_path / "layout"
    layout.mkdir()
    (layout / "index.json").write_text('{"schemaVersion": 2, "manifests": []}')
    (layout / "aipcc-mirror.json").write_text('{"schema": 1, "source_registry": "r.io/n"}')
    make_wheel(tmp_path / "wheels", "lib", "1.0")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command", list(COMMANDS))
@FUZZ
@given(path=PATHS)
def test_fuzz_path_options(world: Path, cli, command: str, path: str) -> None:
    done = cli(*COMMANDS[command](path))
    assert done.code in (0, 1, 2), (done.code, done.err)
    assert "Traceback" not in done.err, done.err
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
