"""render reads the CUDA component table and the index authentication names (label, paths)
without loading the validator's layer readers."""

from __future__ import annotations

import subprocess
import sys


def test_render_loads_only_the_light_validate_modules() -> None:
    code = ("import sys, aipcc_build.render; print(' '.join(sorted("
            "m for m in sys.modules if m.startswith('aipcc_build.validate'))))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, timeout=60).stdout.split()
    assert "aipcc_build.validate.components" in out
    assert set(out) <= {"aipcc_build.validate", "aipcc_build.validate.components",
                        "aipcc_build.validate.index_config", "aipcc_build.validate.results"}


def test_validate_names_still_import_lazily() -> None:
    from aipcc_build.validate import Evidence, validate_image
    from aipcc_build.validate.pipeline import validate_image as direct
    from aipcc_build.validate.results import Evidence as direct_evidence

    assert validate_image is direct and Evidence is direct_evidence
