"""Hostile paths through every emitter (issue 30): the matrix's path fields take a safe
character set only and are refused at load, file:line:column, before any document is
written; what still reaches a document whatever it holds (the matrix file's own name) is
quoted in the document's language: CEL for Konflux's on-cel-expression (evaluated here by
cel-python, a real CEL implementation), YAML, shell."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from aipcc_build.plan.emit.konflux import cel_string
from tests.support import tekton_schema
from tests.unit.plan.test_konflux import generate, konflux_repo

HOSTILE = ['a"b', "a||b", "a\\b", "a\nb", "-a", "x/-a", "$(id)", "a b", "`id`", "a;b"]
FORMATS = ("github", "gitlab", "tekton", "konflux")
FIELD_LINES = {  # field -> the matrix text with VALUE in it
    "templates": "templates: {value}\n",
    "output": "output: {value}\n",
    "images.base.template": "images:\n  base: {{template: {value}, os: [el9]}}\n",
    "images.base.context": "images:\n  base: {{template: base.j2, os: [el9], context: {value}}}\n",
}
MATRIX = """\
schema: 1
product: {{name: t, version: "1"}}
registry: 127.0.0.1:5000/ns
templates: ../templates
{extra}os:
  el9: {{from: localhost/base:1}}
accelerators:
  cpu: {{}}
{images}"""


def hostile_matrix(root: Path, field: str, value: str) -> Path:
    (root / "templates").mkdir(exist_ok=True)
    (root / "templates" / "base.j2").write_text("FROM {{ from }}\n")
    (root / "matrix").mkdir(exist_ok=True)
    text = FIELD_LINES[field]
    quoted = json.dumps(value)  # a YAML double-quoted scalar
    images = "images:\n  base: {template: base.j2, os: [el9]}\n"
    extra = ""
    if field.startswith("images."):
        images = text.format(value=quoted)
    else:
        extra = text.format(value=quoted)
    body = MATRIX.format(extra=extra, images=images)
    if field == "templates":
        body = body.replace("templates: ../templates\n", "", 1)
    path = root / "matrix" / "m.yaml"
    path.write_text(body)
    return path


# Every field with every value, each case through one emitter in turn: every emitter sees
# every field and most values (the refusal comes from the one loader they share).
CASES = [(field, value, FORMATS[n % len(FORMATS)]) for n, (field, value) in enumerate(
    (field, value) for value in HOSTILE for field in FIELD_LINES)]


@pytest.mark.parametrize(("field", "value", "output_format"), CASES)
def test_a_hostile_path_field_is_refused_at_load_by_every_emitter(
        tmp_path: Path, cli, output_format: str, field: str, value: str) -> None:  # type: ignore[no-untyped-def]
    matrix = hostile_matrix(tmp_path, field, value)
    done = cli("--matrix", str(matrix), "plan", "--format", output_format, "--build-id", "1")
    assert done.code == 2, done.err
    assert len(done.err.strip().splitlines()) == 1 and "Traceback" not in done.err
    line, text = next((n, text) for n, text in enumerate(matrix.read_text().splitlines(), 1)
                      if json.dumps(value) in text)
    column = text.index(json.dumps(value)) + 1
    assert f"{matrix}:{line}:{column}: {field}:" in done.err, done.err
    assert "safe path" in done.err
    assert done.out == ""
    assert not (tmp_path / ".tekton").exists() and not (tmp_path / "konflux").exists()


@pytest.mark.parametrize("value", ["containerfiles/base/x", "../wheels", "./a.b_c-d/e",
                                   "/abs/path"])
def test_ordinary_paths_load(tmp_path: Path, value: str) -> None:
    from aipcc_build.matrix import load

    assert load(hostile_matrix(tmp_path, "images.base.context", value))


def evaluator(expression: str):  # type: ignore[no-untyped-def]
    """EXPRESSION compiled by cel-python, evaluated with Pipelines-as-Code's event,
    target_branch and pathChanged() over a set of changed files."""
    celpy = pytest.importorskip("celpy")  # cel-python needs Python 3.10
    celtypes = celpy.celtypes
    environment = celpy.Environment()
    changed: set[str] = set()

    def path_changed(pattern: str) -> object:
        # PaC's globs: DIR/*** is everything under DIR; a plain path is itself.
        regex = re.escape(str(pattern)).replace(re.escape("/***"), "/.*")
        return celtypes.BoolType(any(re.fullmatch(regex, path) for path in changed))

    program = environment.program(environment.compile(expression),
                                  functions={"pathChanged": path_changed})

    def builds(event: str, *paths: str) -> bool:
        changed.clear()
        changed.update(paths)
        return bool(program.evaluate({"event": celtypes.StringType(event),
                                      "target_branch": celtypes.StringType("main")}))

    return builds


@pytest.mark.parametrize("value", [*HOSTILE, '" || true || "', "é\x7f\t", "\\\"", ""])
def test_a_cel_string_is_one_literal_whatever_it_holds(value: str) -> None:
    builds = evaluator(f'event == "push" && {cel_string(value)}.pathChanged()')
    assert builds("push", value)
    assert not builds("push", value + "x")
    assert not builds("pull_request", value)


def test_konflux_builds_of_a_matrix_file_with_a_hostile_name_watch_exactly_it(
        repo: Path, cli) -> None:  # type: ignore[no-untyped-def]
    root = konflux_repo(repo)
    name = 'matrix/we"ird || x\\y z.yaml'
    shutil.copy(root / "matrix" / "aipcc.yaml", root / name)
    files = generate(cli, root / name)
    runs = {p: t for p, t in files.items() if p.startswith(".tekton/")}
    assert runs
    for path, text in runs.items():
        header = text.splitlines()[0]
        assert header.startswith("# Generated by aipcc-build plan --format konflux")
        document = tekton_schema.load(text)
        cel = document["metadata"]["annotations"]["pipelinesascode.tekton.dev/on-cel-expression"]
        builds = evaluator(cel)
        event = "pull_request" if path.endswith("-pull-request.yaml") else "push"
        assert builds(event, name), path  # a change to the matrix rebuilds every component
        assert not builds(event, "README.md"), path  # '||' in the name is no alternative
        assert not builds(event, "matrix/we"), path
        assert not builds("push" if event == "pull_request" else "pull_request", name)
        dockerfile = next(p["value"] for p in document["spec"]["params"]
                          if p["name"] == "dockerfile")
        assert builds(event, dockerfile)


def test_the_job_command_quotes_a_hostile_matrix_name_for_the_shell(repo: Path, cli) -> None:  # type: ignore[no-untyped-def]
    name = "matrix/$(id) `x`; a b.yaml"
    shutil.copy(repo / "matrix" / "aipcc.yaml", repo / name)
    gitlab = cli("--matrix", str(repo / name), "plan", "--format", "gitlab", "--build-id", "1")
    assert gitlab.code == 0, gitlab.err
    jobs = {k: v for k, v in tekton_schema.load(gitlab.out).items() if k.startswith("build:")}
    for job in jobs.values():
        argv = shlex.split(job["script"][-1])
        assert argv[:3] == ["aipcc-build", "--matrix", name]
    github = cli("--matrix", str(repo / name), "plan", "--format", "github", "--build-id", "1")
    assert github.code == 0, github.err
    for wave in (v for k, v in json.loads(github.out).items() if re.fullmatch(r"wave\d+", k)):
        for entry in wave["include"]:
            assert shlex.split(entry["command"])[:3] == ["aipcc-build", "--matrix", name]
