"""toolkit/ is a library under the stages: it loads none of them, and render loads no validator."""

from __future__ import annotations

from tests.support.imports import loaded_by

STAGES = ("matrix", "render", "plan", "build", "validate", "compat", "publish", "report", "cli")

def _loaded(module: str) -> set[str]:
    return loaded_by(f"import {module}")

def test_toolkit_loads_no_stage() -> None:
    loaded = _loaded("aipcc_build.toolkit.components, aipcc_build.toolkit.facts, "
                     "aipcc_build.toolkit.gpu_archs")
    assert {m.split(".")[1] for m in loaded} <= {"toolkit", "errors", "suggest", "patterns",
                                                  "records", "functional"}

def test_render_reads_the_component_table_without_the_validator() -> None:
    loaded = _loaded("aipcc_build.render")
    assert "aipcc_build.toolkit.components" in loaded
    assert not [m for m in loaded if m.startswith("aipcc_build.validate")]
