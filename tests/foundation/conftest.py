"""A small project on disk (matrix + templates) that each test may alter."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from aipcc_build.cli import main

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
          - {version: 12.9.1, min_driver: 575.51.03, eol: 2027-06-30}
          - {version: 12.8.1, min_driver: 570.124.06, eol: 2027-01-31, vars: {cudnn: 9.8.0.87}}
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


@pytest.fixture
def project(tmp_path: Path) -> Project:
    (tmp_path / "matrix").mkdir()
    (tmp_path / "templates").mkdir()
    (tmp_path / "matrix" / "aipcc.yaml").write_text(MATRIX)
    for name, text in TEMPLATES.items():
        (tmp_path / "templates" / name).write_text(text)
    return Project(tmp_path)


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """Run the real entry point in-process; return exit code, stdout, stderr."""
    monkeypatch.delenv("CI", raising=False)
    for variable in ("BUILD_ID", "CI_PIPELINE_IID", "GITHUB_RUN_NUMBER", "AIPCC_BUILD_MATRIX"):
        monkeypatch.delenv(variable, raising=False)

    def run(*args: str) -> Run:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        captured = capsys.readouterr()
        return Run(int(exit_info.value.code or 0), captured.out, captured.err)

    return run
