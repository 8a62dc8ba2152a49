"""Issue 39 target: the `uv` entry point every image has first on PATH (in_image/uv.sh,
which checks what uv reads no constraints for) adds at most 10% to `uv run --with` and to
`uv sync`, on a warm cache.

Each command runs through the entry point and straight on the real uv (uv 0.13.9, the
version the integration tests install), against a find-links directory of small wheels
with the real names, versions and dependencies of torch 2.8.0's set (25 distributions, 14
of them NVIDIA's CUDA 12.8 components; no network): `uv run --no-project --with torch
python -c pass` (its environment cached by the first run) and `uv sync` of a project that
depends on torch (the entry point checks its uv.lock against a CUDA 12.8 image's
constraints each time). The constraints are the image's (toolkit/constraints.py); the
entry point reads them from a temporary directory instead of /etc.

The judged ratio is of CPU time (user and system, uv and the entry point's sh and awk):
on a shared two-core host the shortest wall time of 21 runs still moves by tens of
milliseconds with the neighbours' load, more than the entry point costs. Both are printed.

Run: python bench/uv_entry_point.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, shortest
from requirements_speed import TORCH_28

sys.path.insert(0, str(REPO))
from aipcc_build.toolkit.constraints import (  # noqa: E402
    CONSTRAINTS_PATH,
    UV_WITH_PATH,
    constraints_text,
    target_of,
)
from tests.support.wheels import make_wheel  # noqa: E402

UV_VERSION = "0.13.9"
CACHE = Path(os.environ.get("AIPCC_CACHE") or Path.home() / ".cache" / "aipcc-build")
TARGET = 1.10


def uv_wheel() -> Path:
    directory = CACHE / "uv"
    found = sorted(directory.glob(f"uv-{UV_VERSION}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--only-binary=:all:", "-d", str(directory), f"uv=={UV_VERSION}"],
                       check=True, timeout=600)
        found = sorted(directory.glob(f"uv-{UV_VERSION}-*.whl"))
    return found[0]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="uv-entry-") as temp:
        root = Path(temp)
        subprocess.run([sys.executable, "-m", "venv", str(root / "uv-env")], check=True)
        subprocess.run([str(root / "uv-env" / "bin" / "pip"), "install", "--quiet",
                        str(uv_wheel())], check=True, timeout=600)
        wheels = root / "wheels"
        make_wheel(wheels, "torch", "2.8.0",
                   requires=[f"{name}=={version}" for name, version in TORCH_28.items()])
        for name, version in TORCH_28.items():
            make_wheel(wheels, name, version)
        constraints = root / "aipcc-constraints.txt"
        constraints.write_text(constraints_text(target_of("cuda", "12.8.1")))
        with_file = root / "aipcc-uv-with.txt"
        with_file.write_text(f"-c {constraints}\n")
        entry_dir = root / "entry"
        entry_dir.mkdir()
        entry = entry_dir / "uv"
        entry.write_text((REPO / "aipcc_build" / "in_image" / "uv.sh").read_text()
                         .replace(CONSTRAINTS_PATH, str(constraints))
                         .replace(UV_WITH_PATH, str(with_file)))
        entry.chmod(0o755)
        real = root / "uv-env" / "bin" / "uv"
        env = {**os.environ, "UV_CACHE_DIR": str(root / "cache"), "UV_NO_INDEX": "1",
               "UV_FIND_LINKS": str(wheels), "UV_CONSTRAINT": str(constraints),
               "UV_PYTHON": sys.executable, "UV_NO_CONFIG": "1", "UV_OFFLINE": "1",
               "PATH": f"{entry_dir}:{real.parent}:{os.environ.get('PATH', '')}"}
        env.pop("VIRTUAL_ENV", None)
        project = root / "project"
        project.mkdir()
        (project / "pyproject.toml").write_text(
            '[project]\nname = "app"\nversion = "0"\nrequires-python = ">=3.9"\n'
            'dependencies = ["torch"]\n')
        run_with = ["run", "--no-project", "--with", "torch", "python", "-c", "pass"]
        subprocess.run([str(entry), "sync", "--quiet", "--project", str(project)], env=env,
                       check=True, timeout=300)
        subprocess.run([str(entry), *run_with], env=env, check=True, timeout=300, cwd=root)
        os.chdir(project)
        rows = []
        for label, argv in (("uv run --with", run_with), ("uv sync", ["sync", "--quiet"])):
            plain = shortest([str(real), *argv], env)
            through = shortest([str(entry), *argv], env)
            rows.append((label, plain, through))
        worst = 0.0
        for label, plain, through in rows:
            ratio = through[1] / plain[1]
            worst = max(worst, ratio)
            print(f"{label:14} real uv {plain[0] * 1000:6.1f} ms, CPU {plain[1] * 1000:5.1f} ms"
                  f"   entry point {through[0] * 1000:6.1f} ms, CPU {through[1] * 1000:5.1f} ms"
                  f"   ratio: CPU {ratio:.3f}, wall {through[0] / plain[0]:.3f}")
        print(f"target: at most {TARGET:.2f}x each (CPU); worst {worst:.3f}x: "
              f"{'met' if worst <= TARGET else 'NOT met'}")
        return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
