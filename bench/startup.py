"""Issue 37 target (issue 2's was 1.5): `aipcc-build --version` takes at most 1.2x
`python -c "import click"`.

Run: python bench/startup.py [--instructions]   (uses the aipcc-build on PATH next to this
python; --instructions also prints the ratio of instructions executed, valgrind's count,
which a loaded machine does not move)
"""

from __future__ import annotations

import argparse
import sys

from common import as_installed, installed_script, instructions, shortest

TARGET = 1.2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions executed (valgrind)")
    args = parser.parse_args()
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
    if args.instructions:
        click_count = instructions([sys.executable, "-c", "import click"], env)
        version_count = instructions([script, "--version"], env)
        print(f"instructions: import click {click_count / 1e6:.1f} M, --version "
              f"{version_count / 1e6:.1f} M: ratio {version_count / click_count:.3f}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
