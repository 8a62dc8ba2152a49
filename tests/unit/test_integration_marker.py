"""The plugin that keeps `pytest -m "not integration"` free of outside programs: a unit test
that starts a real buildah is refused, naming the test; a stand-in the test wrote is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import integration_marker


def test_a_system_program_is_refused_in_a_unit_test() -> None:
    with pytest.raises(RuntimeError, match=r"test_a_system_program_is_refused_in_a_unit_test "
                                           r"runs buildah: mark it integration"):
        integration_marker._refuse_outside_programs(
            "subprocess.Popen", ("buildah", ["buildah", "images"], None,
                                 {"PATH": "/usr/local/bin:/usr/bin:/bin"}))


def test_a_stand_in_the_test_wrote_is_allowed(tmp_path: Path) -> None:
    stand_in = tmp_path / "buildah"
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    integration_marker._refuse_outside_programs(
        "subprocess.Popen", ("buildah", ["buildah"], None, {"PATH": str(tmp_path)}))


def test_git_and_the_interpreter_are_allowed() -> None:
    for program in ("git", "python3", "sh"):
        integration_marker._refuse_outside_programs(
            "subprocess.Popen", (program, [program], None, None))


def test_integration_tests_are_marked(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("integration") is None
    assert {"registry", "debian_base", "wheelhouse"} <= integration_marker.REAL_FIXTURES
