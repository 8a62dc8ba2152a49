"""The GitLab child pipeline of the demo on gitlab-ci-local (shell executor, its jobs in
parallel as the engine runs them) against `aipcc-build matrix` of the same six images on
the same machine, both from a clean clone, both pushing to a registry on 127.0.0.1 and
both fetching the build context first (the pipeline's jobs run `ci.fetch` each).
Target: pipeline / matrix <= 1.3.

    python bench/gitlab_pipeline.py [--repeat N]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO, as_installed, remove_images  # noqa: E402
from tests.support.registry import Registry  # noqa: E402


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
    subprocess.run([str(REPO / "scripts" / "fetch-wheels")], check=True, capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        clone = root / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        (root / "bin").mkdir()
        command = root / "bin" / "aipcc-build"
        command.write_text(f'#!/bin/sh\nexec {sys.executable} -m aipcc_build "$@"\n')
        command.chmod(0o755)
        env = as_installed()
        found = re.search(r"AIPCC_CI_TOOLS=(\S+)", tools)
        assert found, tools
        env["PATH"] = f"{root / 'bin'}:{found.group(1)}/bin:{env['PATH']}"
        env["CI"] = "1"
        pipeline, matrix = [], []
        for run in range(args.repeat):
            # A fresh registry for each measurement: both upload every blob (a registry
            # that already holds the Debian layer would favour whichever runs second).
            registry = Registry(root / f"registry-{run}-gitlab")
            registry.root.mkdir()
            registry.start()
            try:
                namespace = f"{registry.host}/bench"
                plan = subprocess.run(
                    ["aipcc-build", "--matrix", "matrix/demo.yaml", "plan", "--format",
                     "gitlab", "--registry", namespace, "--tls-verify", "false",
                     "--build-id", "1"], cwd=clone, env=env, check=True, capture_output=True,
                    text=True).stdout
                (clone / "child-pipeline.yml").write_text(plan)
                shutil.rmtree(clone / "demo-wheelhouse", ignore_errors=True)
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
                shutil.rmtree(clone / "demo-wheelhouse", ignore_errors=True)
                matrix.append(timed(["sh", "-c", "scripts/fetch-wheels demo-wheelhouse && "
                                     "aipcc-build --matrix matrix/demo.yaml matrix --push "
                                     f"--registry {registry.host}/bench --tls-verify false "
                                     "--build-id 1"], clone, env))
            finally:
                registry.stop()
                remove_images(f"{registry.host}/")
    best_pipeline, best_matrix = min(pipeline), min(matrix)
    print(f"gitlab child pipeline (gitlab-ci-local, 6 jobs): {best_pipeline:.1f} s")
    print(f"aipcc-build matrix (same 6 images):              {best_matrix:.1f} s")
    print(f"ratio pipeline / matrix: {best_pipeline / best_matrix:.2f} (target <= 1.3)")


if __name__ == "__main__":
    main()
