"""Issue 2 target: `aipcc-build --version` takes at most 1.5x `python -c "import click"`.

Run: python bench/startup.py   (uses the aipcc-build on PATH next to this python)
"""

from __future__ import annotations

import sys

from common import as_installed, installed_script, shortest


def main() -> int:
    script = installed_script()
    env = as_installed()
    shortest([sys.executable, "-c", "import click"], env, repeat=3)  # warm the page cache
    click_time = shortest([sys.executable, "-c", "import click"], env)
    version_time = shortest([script, "--version"], env)
    ratio = version_time / click_time
    print(f"python -c 'import click': {click_time * 1000:.1f} ms; "
          f"aipcc-build --version: {version_time * 1000:.1f} ms")
    print(f"ratio: {ratio:.2f} (target <= 1.5)")
    return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
