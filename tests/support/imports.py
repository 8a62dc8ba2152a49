"""Which of the product's modules a statement loads, in a fresh interpreter: how the tests
hold the layering (a library loads no stage) and the import cost of a command."""

from __future__ import annotations

import subprocess
import sys


def loaded_by(statement: str) -> set[str]:
    code = (f"import sys; {statement}; print(' '.join(sorted("
            "m for m in sys.modules if m.startswith('aipcc_build.'))))")
    return set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                              text=True, timeout=60).stdout.split())
