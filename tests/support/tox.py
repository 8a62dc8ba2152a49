"""The environment tox gives the suite: this process's, filtered by tox's own reading of
tox.ini's pass_env (its defaults included)."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]


def tox_environment(extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """This process's environment plus EXTRA, as tox's `py` environment passes it; PATH
    tox always sets."""
    out = subprocess.run([sys.executable, "-m", "tox", "config", "-e", "py", "-k", "pass_env"],
                         cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    patterns = [line.strip() for line in out.stdout.splitlines()[2:] if line.strip()]
    assert patterns, out.stdout
    outside = {**os.environ, **(extra or {})}
    env = {key: value for key, value in outside.items()
           if any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns)}
    env["PATH"] = os.environ["PATH"]
    return env
