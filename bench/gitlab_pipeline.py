"""The GitLab child pipeline of the demo on gitlab-ci-local (shell executor, its jobs in
parallel as the engine runs them) against `aipcc-build matrix` of the same six images on
the same machine, both from a clean clone, both pushing to a registry on 127.0.0.1 and
both running the matrix's `ci.fetch` first (each pipeline job runs it), both for this
host's platform (as the CI engine tests plan). The wheel indexes the fetch serves are
published once before the measurements; the server is stopped after them when this run
started it. Target: pipeline / matrix <= 1.3.

    python bench/gitlab_pipeline.py [--repeat N]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aipcc_build.matrix.platforms import host_platform  # noqa: E402
from bench.common import REPO, as_installed, remove_images  # noqa: E402
from tests.support.registry import Registry  # noqa: E402

FETCH = "scripts/demo-wheel-index-serve"  # matrix/demo.yaml's ci.fetch
INDEX_PIDFILE = Path.home() / ".cache" / "aipcc-build" / "demo-index" / "server.pid"


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=3600)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"{argv[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    tools = subprocess.run([str(REPO / "scripts" / "ci-tools")], check=True,
                           capture_output=True, text=True).stdout
    subprocess.run([str(REPO / "scripts" / "base-os")], check=True, capture_output=True)
    started = not INDEX_PIDFILE.exists()
    subprocess.run([str(REPO / FETCH)], check=True, capture_output=True)
    try:
        pipeline, matrix = measure(tools, args.repeat)
    finally:
        if started:
            subprocess.run([str(REPO / "scripts" / "serve-dir"), "--stop", "--pidfile",
                            str(INDEX_PIDFILE)], capture_output=True)
    best_pipeline, best_matrix = min(pipeline), min(matrix)
    print(f"gitlab child pipeline (gitlab-ci-local, 6 jobs): {best_pipeline:.1f} s")
    print(f"aipcc-build matrix (same 6 images):              {best_matrix:.1f} s")
    print(f"ratio pipeline / matrix: {best_pipeline / best_matrix:.2f} (target <= 1.3)")


def measure(tools: str, repeat: int) -> tuple[list[float], list[float]]:
    platform = host_platform()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        clone = root / "clone"
        # Shallow, as GitLab runners fetch (GIT_DEPTH): gitlab-ci-local copies the whole
        # checkout, .git included, into every job, and the history is not what is measured.
        subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{REPO}", str(clone)],
                       check=True)
        (root / "bin").mkdir()
        command = root / "bin" / "aipcc-build"
        command.write_text(f'#!/bin/sh\nexec {sys.executable} -m aipcc_build "$@"\n')
        command.chmod(0o755)
        env = as_installed()
        found = re.search(r"AIPCC_CI_TOOLS=(\S+)", tools)
        assert found, tools
        env["PATH"] = f"{root / 'bin'}:{found.group(1)}/bin:{env['PATH']}"
        env["CI"] = "1"
        pipeline: list[float] = []
        matrix: list[float] = []
        for run in range(repeat):
            # A fresh registry for each measurement: both upload every blob (a registry
            # that already holds the Debian layer would favour whichever runs second).
            registry = Registry(root / f"registry-{run}-gitlab")
            registry.root.mkdir()
            registry.start()
            try:
                namespace = f"{registry.host}/bench"
                plan = subprocess.run(
                    ["aipcc-build", "--matrix", "matrix/demo.yaml", "plan", "--format",
                     "gitlab", "--registry", namespace, "--no-tls-verify",
                     "--build-id", "1", "--platform", platform], cwd=clone, env=env,
                    check=True, capture_output=True, text=True).stdout
                (clone / "child-pipeline.yml").write_text(plan)
                pipeline.append(timed(["gitlab-ci-local", "--force-shell-executor",
                                       "--shell-isolation", "--file", "child-pipeline.yml"],
                                      clone, env))
            finally:
                registry.stop()
                remove_images(f"{registry.host}/")
            registry = Registry(root / f"registry-{run}-matrix")
            registry.root.mkdir()
            registry.start()
            try:
                matrix.append(timed(["sh", "-c", f"{FETCH} && "
                                     "aipcc-build --matrix matrix/demo.yaml matrix --push "
                                     f"--registry {registry.host}/bench --no-tls-verify "
                                     f"--build-id 1 --platform {platform}"], clone, env))
            finally:
                registry.stop()
                remove_images(f"{registry.host}/")
    return pipeline, matrix


if __name__ == "__main__":
    main()
