"""Issue 37 target (issue 2's was 1.5): `aipcc-build --version` takes at most 1.2x
`python -c "import click"`.

Run: python bench/startup.py   (uses the aipcc-build on PATH next to this python)
"""

from __future__ import annotations

import sys

from common import as_installed, installed_script, shortest

TARGET = 1.2


def main() -> int:
    script = installed_script()
    env = as_installed()
    shortest([sys.executable, "-c", "import click"], env, repeat=3)  # warm the page cache
    click_wall, click_cpu = shortest([sys.executable, "-c", "import click"], env)
    version_wall, version_cpu = shortest([script, "--version"], env)
    ratio = version_wall / click_wall
    print(f"python -c 'import click': {click_wall * 1000:.1f} ms ({click_cpu * 1000:.1f} ms "
          f"CPU); aipcc-build --version: {version_wall * 1000:.1f} ms "
          f"({version_cpu * 1000:.1f} ms CPU)")
    print(f"ratio: {ratio:.2f} (target <= {TARGET}); in CPU time: "
          f"{version_cpu / click_cpu:.2f}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
