"""Issue 25 target: publishing 3 variants of 200 wheels to a local Pulp with `aipcc-build
index pulp+http://...`, then republishing after one wheel is added: the republish must cost
at most 0.3x the first publish. Both are quoted against the same work done by hand with
pulp-cli (one `pulp python content upload` per wheel, one `repository content modify` and
one `distribution update` per variant), on wheels of their own (nothing deduplicated).

Run: python bench/pulp_publish.py [--wheels N] [--skip-pulp-cli]
Starts its own Pulp (tests/support/pulp.py: PostgreSQL from Debian, the pinned Pulp
virtualenv under $AIPCC_CACHE, built on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support import pulp as pulp_server  # noqa: E402
from tests.support import wheels  # noqa: E402

VARIANTS = ("cpu-debian", "cuda12.8-debian", "cuda12.9-debian")


def make_wheel(directory: Path, name: str, version: str) -> Path:
    # 8 KiB of payload each, as bench/index_publish.py's: small wheels, the worst case for
    # the ratio (the fixed costs of a run weigh most).
    return wheels.make_wheel(directory, name, version,
                             files={f"{name}/__init__.py": os.urandom(4096).hex().encode()})


def wheel_sets(root: Path, count: int) -> dict[str, Path]:
    sets = {}
    for variant in VARIANTS:
        directory = root / variant
        directory.mkdir(parents=True)
        for number in range(count):
            make_wheel(directory, f"project_{number}", "1.0")
        sets[variant] = directory
    return sets


def ours(pulp: pulp_server.Pulp, work: Path, count: int) -> tuple[float, float]:
    prefix = "ours"
    project = work / "ours"
    (project / "matrix").mkdir(parents=True)
    (project / "templates").mkdir()
    (project / "templates" / "app.Containerfile.j2").write_text("FROM {{ os_from }}\n")
    matrix = project / "matrix" / "bench.yaml"
    matrix.write_text(pulp_server.MATRIX.format(api=pulp.api, prefix=prefix,
                                                base="localhost/unused"))
    sets = wheel_sets(work / "ours-wheels", count)
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "XDG_CONFIG_HOME": str(pulp.work / "config")}
    args = [sys.executable, "-m", "aipcc_build", "--matrix", str(matrix), "index",
            f"pulp+{pulp.api}", *(f"{v}={d}" for v, d in sets.items())]

    def run() -> float:
        start = time.perf_counter()
        done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=project,
                              timeout=3600)
        if done.returncode != 0:
            raise SystemExit(f"aipcc-build index failed: {done.stderr[-2000:]}")
        return time.perf_counter() - start

    first = run()
    make_wheel(sets[VARIANTS[0]], "added_project", "1.0")
    again = run()
    return first, again


def by_hand(pulp: pulp_server.Pulp, work: Path, count: int) -> tuple[float, float]:
    """The same with pulp-cli, as a person's shell loop would do it."""
    sets = wheel_sets(work / "hand-wheels", count)

    def cli(*args: str) -> str:
        done = pulp.cli(*args, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"pulp {' '.join(args[:4])}: {done.stderr[-500:]}")
        return done.stdout

    for variant in VARIANTS:  # set-up, not timed
        cli("python", "repository", "create", "--name", f"hand-{variant}")
        cli("python", "distribution", "create", "--name", f"hand-{variant}", "--base-path",
            f"hand/1.0/{variant}")

    def publish(files: dict[str, list[Path]]) -> float:
        start = time.perf_counter()
        for variant, paths in files.items():
            shas = []
            for path in paths:
                unit = json.loads(cli("python", "content", "upload", "--relative-path",
                                      path.name, "--file", str(path)))
                shas.append({"sha256": unit["sha256"]})
            listing = work / f"add-{variant}.json"
            listing.write_text(json.dumps(shas))
            cli("python", "repository", "content", "modify", "--repository",
                f"hand-{variant}", "--add-content", f"@{listing}")
            latest = json.loads(cli("python", "repository", "show", "--name",
                                    f"hand-{variant}"))["latest_version_href"]
            cli("python", "distribution", "update", "--name", f"hand-{variant}",
                "--repository", f"hand-{variant}", "--version",
                latest.rstrip("/").rsplit("/", 1)[1])
        return time.perf_counter() - start

    first = publish({v: sorted(d.glob("*.whl")) for v, d in sets.items()})
    added = make_wheel(sets[VARIANTS[0]], "added_project", "1.0")
    again = publish({VARIANTS[0]: [added]})
    return first, again


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=int, default=200, help="wheels per variant")
    parser.add_argument("--skip-pulp-cli", action="store_true")
    args = parser.parse_args()
    reason = pulp_server.unavailable()
    if reason:
        print(f"skipped: {reason}")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-pulp-") as tmp, \
            pulp_server.running() as pulp:
        first, again = ours(pulp, Path(tmp), args.wheels)
        print(f"aipcc-build index: first publish of {len(VARIANTS)} variants x "
              f"{args.wheels} wheels {first:.1f} s; republish after adding one wheel "
              f"{again:.1f} s; ratio {again / first:.3f} (target <= 0.3)")
        if not args.skip_pulp_cli:
            hand_first, hand_again = by_hand(pulp, Path(tmp), args.wheels)
            print(f"pulp-cli by hand: first publish {hand_first:.1f} s "
                  f"({hand_first / first:.1f}x aipcc-build's); one wheel added "
                  f"{hand_again:.1f} s ({hand_again / again:.1f}x aipcc-build's)")
    return 0 if again / first <= 0.3 else 1


if __name__ == "__main__":
    sys.exit(main())
