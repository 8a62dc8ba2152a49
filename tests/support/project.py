"""Projects the tests work on: a small one written from scratch (a matrix and three
templates), and a copy of the shipped one (matrix, templates, Containerfiles), optionally
as a git repository."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]

MATRIX = textwrap.dedent("""\
    schema: 1
    product: {name: aipcc, version: "3.0"}
    registry: quay.io/aipcc
    os:
      ubi9:  {from: registry.access.redhat.com/ubi9/ubi:9.6}
      el9.6: {from: registry.redhat.io/rhel9/rhel:9.6}
    accelerators:
      cuda:
        variant: "cuda-{os}"
        versions:
          - {version: 12.9.1, native_driver: 575.57.08, eol: 2027-06-30}
          - {version: 12.8.1, native_driver: 570.124.06, eol: 2027-01-31, vars: {cudnn: 9.8.0.87}}
      rocm:
        versions:
          - {version: 6.4.1}
          - {version: 6.3.4}
      cpu: {}
    images:
      builder:
        template: builder.Containerfile.j2
        repository: "{registry}/builder/{name}"
        os: [ubi9]
      base:
        template: base.Containerfile.j2
        repository: "{registry}/base-images/{name}"
        os: [el9.6]
      devel:
        template: devel.Containerfile.j2
        from_image: base
        os: [el9.6]
        resources: {cpu: 2, memory: 4Gi}
    exclude:
      - {accelerator: rocm, os: el9.6}
    """)

TEMPLATES = {
    "builder.Containerfile.j2": "FROM {{ os_from }}\nRUN echo {{ accelerator }} {{ version }}\n",
    "base.Containerfile.j2": (
        "FROM {{ os_from }}\n"
        "{% if vars.cudnn is defined %}RUN echo cudnn {{ vars.cudnn }}\n{% endif %}"
    ),
    "devel.Containerfile.j2": "FROM {{ from_ref }}\nRUN echo {{ name }}\n",
}


@dataclass
class Project:
    root: Path

    @property
    def matrix(self) -> Path:
        return self.root / "matrix" / "aipcc.yaml"

    @property
    def output(self) -> Path:
        return self.root / "containerfiles"

    def edit(self, old: str, new: str) -> None:
        text = self.matrix.read_text()
        assert old in text, old
        self.matrix.write_text(text.replace(old, new, 1))

    def template(self, name: str, text: str) -> None:
        (self.root / "templates" / name).write_text(text)


def small_project(root: Path) -> Project:
    (root / "matrix").mkdir()
    (root / "templates").mkdir()
    (root / "matrix" / "aipcc.yaml").write_text(MATRIX)
    for name, text in TEMPLATES.items():
        (root / "templates" / name).write_text(text)
    return Project(root)


def shipped_project(root: Path) -> Path:
    """The shipped matrix, templates and rendered Containerfiles, copied under ROOT."""
    for part in ("matrix", "templates", "containerfiles"):
        shutil.copytree(REPO / part, root / part)
    return root


def git(directory: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(directory), *args], check=True,
                          capture_output=True, text=True).stdout


def git_repository(project: Path, borrowed: Optional[Path] = None) -> Path:
    """PROJECT as a git repository with everything committed. BORROWED: another
    repository's object store (its .git/objects) this one reads the objects it already holds
    from (git's alternates) instead of writing its own copies, and no sample hooks: for git
    the same repository, but some 20 files instead of some 220 (the unit tests make one per
    test)."""
    lean = ["--template="] if borrowed is not None else []
    git(project, "init", "-q", "-b", "main", *lean)
    if borrowed is not None:
        (project / ".git/objects/info/alternates").write_text(f"{borrowed}\n")
    git(project, "config", "user.email", "ci@example.com")
    git(project, "config", "user.name", "CI")
    (project / "README.md").write_text("# images\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "initial")
    return project


def without_source_url(repo: Path) -> Path:
    """REPO with a matrix that names no ci.source_url (its `ci:` holds nothing else):
    clusters clone what the `origin` remote says."""
    matrix = repo / "matrix/aipcc.yaml"
    matrix.write_text(re.sub(r"^ci:\n(?:  .*\n)+\n", "", matrix.read_text(), flags=re.M))
    git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty",
        "-am", "no source_url: origin")
    return repo


def with_origin(repo: Path, url: str) -> Path:
    """REPO whose clusters clone its `origin` remote, URL."""
    git(repo, "remote", "add", "origin", url)
    return without_source_url(repo)


def check_jsonschema(*args: str) -> subprocess.CompletedProcess[str]:
    """check-jsonschema validates offline: the vendored schemas ship in the PyPI package.
    Its own entry point runs in this process, as `python -m check_jsonschema` would run it
    (exit code, output): what is tested is its verdict, and a process of its own cost each
    call a second of imports."""
    from check_jsonschema import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([*args], prog_name="check-jsonschema")
        except SystemExit as exit_info:
            code = exit_info.code
        else:
            code = 0
    return subprocess.CompletedProcess(["check-jsonschema", *args],
                                       code if isinstance(code, int) else 1,
                                       out.getvalue(), err.getvalue())
