"""wheel_indexes/ is a room of its own (issue 31): image release does not load it, it loads
no stage after it, and the CLI names its default without loading the judging."""

from __future__ import annotations

import subprocess
import sys


def _loaded(module: str) -> set[str]:
    code = (f"import sys, {module}; print(' '.join(sorted("
            "m for m in sys.modules if m.startswith('aipcc_build.'))))")
    return set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                              text=True, timeout=60).stdout.split())


def test_the_wheel_indexes_load_no_image_release_nor_the_cli() -> None:
    loaded = _loaded("aipcc_build.wheel_indexes.destinations, aipcc_build.wheel_indexes.pulp,"
                     " aipcc_build.wheel_indexes.static_tree")
    assert not {m for m in loaded if m.split(".")[1] in ("publish", "cli", "report")}


def test_image_release_loads_no_wheel_index() -> None:
    loaded = _loaded("aipcc_build.publish.promote, aipcc_build.publish.mirror")
    assert not [m for m in loaded if m.startswith("aipcc_build.wheel_indexes")]


def test_the_cli_loads_no_judging_of_wheels() -> None:
    loaded = _loaded("aipcc_build.cli")
    assert not [m for m in loaded if m.startswith("aipcc_build.wheel_indexes.")]
