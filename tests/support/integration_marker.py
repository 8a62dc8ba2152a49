"""A pytest plugin: the `integration` marker names exactly the tests that need outside
programs, so that `pytest -m "not integration"` runs the fast part on any machine.

A test is an integration test when it lives under tests/integration/, asks for a fixture that
starts or builds something real (a registry, a base image, the wheelhouse), or says so with
the marker. Every other test may not start a program the README's setup installs: an audit
hook refuses it (a stand-in the test wrote is fine), so a unit test that reaches a real
buildah fails at once instead of quietly needing the machine. git, the interpreter and the
shell's small tools stay allowed: the plan tests build throwaway repositories, and the
runner's tests read real pipes.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

INTEGRATION_DIR = Path(__file__).resolve().parent.parent / "integration"

# Fixtures that need the real programs (tests/conftest.py, tests/integration/conftest.py).
REAL_FIXTURES = frozenset({
    "registry", "registries", "base_image", "debian_base", "debian_base_arm64", "wheelhouse",
    "wheel_index", "images", "pulp",
})

# What the README's setup installs (Makefile SYSTEM_PACKAGES_*), and the root-only mount.
OUTSIDE_PROGRAMS = frozenset({
    "buildah", "skopeo", "podman", "docker-registry", "registry", "mmdebstrap", "qemu-aarch64",
    "nginx", "postgres", "pg_ctl", "initdb", "mount", "umount", "gcc", "cc", "uv",
    "gitlab-ci-local", "act", "chromium", "zstd", "rpm", "rpmbuild",
})

SYSTEM_DIRS = ("/usr/", "/bin/", "/sbin/", "/opt/")

_unit_test: Optional[str] = None


def _refuse_outside_programs(event: str, args: tuple[Any, ...]) -> None:
    if event != "subprocess.Popen" or _unit_test is None:
        return
    program = os.path.basename(os.fsdecode(args[0])) if args[0] is not None else ""
    if program not in OUTSIDE_PROGRAMS:
        return
    environ = args[3] if len(args) > 3 and args[3] is not None else os.environ
    found = shutil.which(os.fsdecode(args[0]), path=environ.get("PATH"))
    # A stand-in a test wrote into its own directory is no outside program.
    if found is None or found.startswith(SYSTEM_DIRS):
        raise RuntimeError(f"{_unit_test} runs {program}: mark it integration "
                           "(tests/support/integration_marker.py)")


def pytest_configure(config: pytest.Config) -> None:
    sys.addaudithook(_refuse_outside_programs)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath)).resolve()
        if INTEGRATION_DIR in path.parents or REAL_FIXTURES & set(
                getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


def _guarded(item: pytest.Item) -> Any:
    global _unit_test
    _unit_test = None if item.get_closest_marker("integration") else item.nodeid
    try:
        yield
    finally:
        _unit_test = None


# The set-up and the call of a unit test are guarded, not its teardown: the last test of a
# session tears down the session's fixtures (images an integration fixture built), which
# run buildah and are no part of it.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    yield from _guarded(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    yield from _guarded(item)
