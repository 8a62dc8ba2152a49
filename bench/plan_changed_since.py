"""Benchmark: `plan --changed-since` against `plan` on a 500-image matrix in a temporary git
repository with 1,000 commits. Target (issue 6): the ratio is at most 3.

    python bench/plan_changed_since.py

The matrix has 125 toolkit versions x 4 image kinds (builder on two OSes, base, and devel
built FROM base); every template imports a shared macro file. The 1,000 commits touch a
notes file, templates, Containerfiles and the matrix, and the plan diffs against the
first commit, so git compares the whole history's worth of changes.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aipcc_build.matrix import expand, load  # noqa: E402
from aipcc_build.render import apply, render_all  # noqa: E402

VERSIONS = 125  # x 4 images each
COMMITS = 1000
RUNS = 5


def write_project(root: Path) -> Path:
    templates = root / "templates"
    templates.mkdir()
    (templates / "_common.j2").write_text(
        "{% macro toolkit(accelerator, version) -%}\n"
        "RUN echo install {{ accelerator }} {{ version }}\n"
        "{%- endmacro %}\n")
    for kind, base in (("builder", "{{ os_from }}"), ("base", "{{ os_from }}"),
                       ("devel", "{{ from_ref }}")):
        (templates / f"{kind}.Containerfile.j2").write_text(
            '{% import "_common.j2" as common -%}\n'
            f"FROM {base}\n"
            "{{ common.toolkit(accelerator, version) }}\n")
    versions = "\n".join(
        f"      - version: {1 + i // 50}.{i % 50}.0\n        vars: {{build: '{i}'}}"
        for i in range(VERSIONS))
    matrix = root / "matrix" / "bench.yaml"
    matrix.parent.mkdir()
    matrix.write_text(
        "# A generated matrix for bench/plan_changed_since.py\n"
        "schema: 1\nproduct: {name: bench, version: '1.0'}\nregistry: example.com/bench\n"
        "os:\n  ubi9: {from: example.com/ubi9:9}\n  ubi10: {from: example.com/ubi10:10}\n"
        "  el9: {from: example.com/el9:9}\n"
        f"accelerators:\n  cuda:\n    versions:\n{versions}\n"
        "images:\n"
        "  builder: {template: builder.Containerfile.j2, os: [ubi9, ubi10]}\n"
        "  base: {template: base.Containerfile.j2, os: [el9]}\n"
        "  devel: {template: devel.Containerfile.j2, from_image: base, os: [el9]}\n")
    loaded = load(matrix)
    assert len(expand(loaded)) == 4 * VERSIONS, len(expand(loaded))
    apply(loaded, render_all(loaded), check=False, remove_stale=False)
    return matrix


def git(root: Path, *args: str, stdin: bytes | None = None) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, input=stdin,
                          capture_output=True).stdout.decode()


def make_history(root: Path, matrix: Path) -> str:
    """Commit the project, then COMMITS more with git fast-import; return the first commit."""
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.email=b@example.com", "-c", "user.name=bench", "commit", "-q",
        "-m", "initial")
    first = git(root, "rev-parse", "HEAD").strip()
    containerfiles = sorted(p.relative_to(root).as_posix()
                            for p in (root / "containerfiles").rglob("Containerfile"))
    matrix_text = matrix.read_text()
    stream = []
    for number in range(COMMITS):
        files = [("NOTES.md", f"note {number}\n")]
        if number % 10 == 0:
            path = containerfiles[number % len(containerfiles)]
            files.append((path, (root / path).read_text() + f"# touched {number}\n"))
        if number % 100 == 0:
            matrix_text = matrix_text.replace(f"build: '{number // 100}'",
                                              f"build: 'x{number // 100}'")
            files.append((matrix.relative_to(root).as_posix(), matrix_text))
        stream.append(f"commit refs/heads/main\ncommitter bench <b@example.com> "
                      f"{1700000000 + number} +0000\n")
        message = f"change {number}"
        stream.append(f"data {len(message)}\n{message}\n")
        if number == 0:
            stream.append(f"from {first}\n")
        for path, text in files:
            data = text.encode()
            stream.append(f"M 100644 inline {path}\ndata {len(data)}\n{text}\n")
    git(root, "fast-import", "--quiet", stdin="".join(stream).encode())
    git(root, "reset", "-q", "--hard", "main")
    return first


def timed(command: list[str], cwd: Path) -> float:
    best = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(command, cwd=cwd, check=True, capture_output=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
        best.append(time.perf_counter() - start)
    return statistics.median(best)


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        matrix = write_project(root)
        first = make_history(root, matrix)
        count = git(root, "rev-list", "--count", "HEAD").strip()
        base = [sys.executable, "-c", "from aipcc_build.cli import main; main()",
                "--matrix", str(matrix), "plan"]
        plain = timed(base, root)
        changed = timed([*base, "--changed-since", first], root)
        selected = subprocess.run([*base, "--changed-since", first], cwd=root, check=True,
                                  capture_output=True, text=True,
                                  env=dict(os.environ, PYTHONPATH=str(ROOT))).stdout
        keys = selected.count('"key"')
        print(f"images: {4 * VERSIONS}, commits: {count}, "
              f"selected since the first commit: {keys}")
        print(f"plan:                   {plain:.3f} s (median of {RUNS})")
        print(f"plan --changed-since:   {changed:.3f} s (median of {RUNS})")
        print(f"ratio: {changed / plain:.2f} (target <= 3)")


if __name__ == "__main__":
    main()
