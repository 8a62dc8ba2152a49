"""Output that fits: tables choose their columns by the terminal's width and never cut an
image name or reference, at 80, 120 and 200 columns, styled (rich) or plain (a pipe);
NO_COLOR means no escape code at all, FORCE_COLOR styles a pipe; CI logs fold a failed
image's log on GitLab as on GitHub."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from aipcc_build.imagebuild.outcomes import Status, StatusChanged
from aipcc_build.report.progress import MatrixView
from tests.support.project import REPO

WIDTHS = (80, 120, 200)
MATRICES = {name: str(REPO / "matrix" / f"{name}.yaml") for name in ("aipcc", "demo")}
ESCAPE = "\x1b"


def references(cli, matrix: str) -> tuple[list[str], list[str]]:
    images = json.loads(cli("--matrix", matrix, "list", "--json").out)["images"]
    return [i["name"] for i in images], [i["reference"] for i in images]


@pytest.fixture(params=["plain", "styled"])
def style(request, monkeypatch) -> str:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("CI", raising=False)
    if request.param == "styled":
        monkeypatch.setenv("FORCE_COLOR", "1")
    else:
        monkeypatch.delenv("FORCE_COLOR", raising=False)
    return str(request.param)


def whole_on_a_line(text: str, words: list[str]) -> list[str]:
    """The WORDS no line of TEXT holds whole (a cut or wrapped one)."""
    lines = text.splitlines()
    return [word for word in words
            if not any(re.search(rf"(?<![\w./:-]){re.escape(word)}(?![\w./:-])", line)
                       for line in lines)]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("matrix", sorted(MATRICES))
@pytest.mark.parametrize("command", [("list",), ("compat",),
                                     ("select", "--gpu", "H100", "--driver", "575.57.08")])
def test_no_table_cuts_a_name_or_reference(cli, monkeypatch, style, width, matrix, command):
    names, refs = references(cli, MATRICES[matrix])
    monkeypatch.setenv("COLUMNS", str(width))
    result = cli("--matrix", MATRICES[matrix], *command, "--today", "2026-11-28") \
        if command[0] != "list" else cli("--matrix", MATRICES[matrix], *command)
    assert result.code == 0, result.err
    assert whole_on_a_line(result.out, refs) == []
    if command[0] != "select":
        assert whole_on_a_line(result.out, names) == []
    if command[0] == "list" and style == "plain":
        # Piped, the lines fit too: the columns that do not fit are left out, and said so.
        assert max(len(line) for line in result.out.splitlines()) <= width
        if width < 200:
            assert "--wide shows every column" in result.err


def test_wide_shows_every_column(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    result = cli("--matrix", MATRICES["aipcc"], "list", "--wide")
    assert result.out.splitlines()[0].split() == [
        "NAME", "KIND", "ACCELERATOR", "VERSION", "OS", "PLATFORMS", "VARIANT", "REFERENCE",
        "TEMPLATE"]
    assert "left out" not in result.err


@pytest.mark.parametrize("command", [("list",), ("compat",)])
def test_no_color_means_no_escape_code_at_all(cli, monkeypatch, command):
    """rich's own NO_COLOR keeps bold: the headers were bold under NO_COLOR=1."""
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal, as far as rich can tell
    monkeypatch.setenv("NO_COLOR", "1")
    result = cli("--matrix", MATRICES["aipcc"], *command)
    assert result.code == 0
    assert ESCAPE not in result.out + result.err


def test_force_color_styles_a_pipe(cli, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert ESCAPE in cli("--matrix", MATRICES["aipcc"], "list").out
    monkeypatch.delenv("FORCE_COLOR")
    assert ESCAPE not in cli("--matrix", MATRICES["aipcc"], "list").out


def failed_image_log(monkeypatch, **environ: str) -> str:
    for name in ("GITHUB_ACTIONS", "GITLAB_CI", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    stream = io.StringIO()
    view = MatrixView(stream)
    view(StatusChanged("base/cuda-12.9-el9.6", Status.FAILED, "build failed",
                       ("STEP 3/5: RUN pip install", "No matching distribution found"),
                       "logs/base/cuda-12.9-el9.6.log"))
    return stream.getvalue()


def test_gitlab_shows_a_failed_images_log_in_an_expanded_section(monkeypatch):
    """Issue 38.4: the failing step's last lines unfolded, GitLab's section expanded."""
    log = failed_image_log(monkeypatch, GITLAB_CI="true")
    start = re.search(r"\x1b\[0Ksection_start:\d+:(log_base_cuda-12\.9-el9\.6)"
                      r"\[collapsed=false\]\r\x1b\[0K\[base/cuda-12\.9-el9\.6\] failed: build "
                      r"failed", log)
    assert start, log
    assert re.search(rf"\x1b\[0Ksection_end:\d+:{re.escape(start.group(1))}\r\x1b\[0K", log)
    assert log.index("No matching distribution") < log.index("section_end")
    assert "collapsed=true" not in log


def test_github_annotates_and_shows_the_lines_unfolded(monkeypatch):
    github = failed_image_log(monkeypatch, GITHUB_ACTIONS="true")
    assert "::error title=base/cuda-12.9-el9.6 failed::build failed" in github
    assert "::group::" not in github and "section_start" not in github
    assert "[base/cuda-12.9-el9.6] | No matching distribution found" in github
    # NO_COLOR takes colour away and nothing else: GitLab's sections stay.
    plain = failed_image_log(monkeypatch, GITLAB_CI="true", NO_COLOR="1")
    assert "section_start" in plain and "No matching distribution found" in plain
    assert not re.search(r"\x1b\[[0-9;]*m", plain)


def on_a_terminal(*args: str, **environ: str) -> str:
    """What aipcc-build prints on a real terminal (a pseudo-terminal), 120 columns."""
    from tests.support.terminal import on_a_terminal as run

    return run(["-m", "aipcc_build", *args], environ=environ)


def test_no_color_on_a_terminal_prints_no_bold():
    styled = on_a_terminal("--matrix", MATRICES["aipcc"], "list")
    assert ESCAPE in styled  # a terminal: rich, bold headers
    plain = on_a_terminal("--matrix", MATRICES["aipcc"], "list", NO_COLOR="1")
    assert ESCAPE not in plain
    assert "quay.io/aipcc/devel/cuda-12.8-el9.6:3.0-dev" in plain


@pytest.mark.parametrize("width", WIDTHS)
def test_the_build_summary_cuts_no_reference(capsys, monkeypatch, style, width):
    """`aipcc-build matrix`'s closing table: references with their digests stay whole."""
    from aipcc_build.imagebuild.outcomes import ImageResult, RunResult
    from aipcc_build.matrix import expand, load
    from aipcc_build.report.progress import matrix_summary

    monkeypatch.setenv("COLUMNS", str(width))
    images = expand(load(MATRICES["aipcc"]))
    digest = "sha256:" + "ab" * 32
    matrix_summary(RunResult(tuple(
        ImageResult(image, Status.OK, "", digest=digest, start=1.0, end=2.5,
                    toolkits={"cuda": ["12.9"]}) for image in images), 0.0, 3.0), None)
    out = capsys.readouterr().out
    assert whole_on_a_line(out, [i.reference for i in images] + [digest]) == []
    assert whole_on_a_line(out, [i.key for i in images]) == []


def test_no_color_on_a_terminal_keeps_the_live_view_without_colour(monkeypatch):
    """Issue 38.4: NO_COLOR turned the live build view off; it only takes colour away."""
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    stream = Terminal()
    with MatrixView(stream) as view:
        assert view.live is not None
        view(StatusChanged("base/cpu-debian", Status.FAILED, "build failed",
                           ("STEP 2/2: RUN false",), "logs/base/cpu-debian.log"))
    shown = stream.getvalue()
    assert "[base/cpu-debian] failed: build failed" in shown
    assert "whole log: logs/base/cpu-debian.log" in shown
    assert not re.search(r"\x1b\[[0-9;]*m", shown)  # no colour, no bold


def test_a_failed_build_on_github_points_at_its_containerfile_and_log(monkeypatch, tmp_path,
                                                                      capsys):
    """Issue 38.4: the error annotation names the image's Containerfile, the job summary
    gets the failure with its last lines, the log's path is printed, and the closing table
    says why each image failed."""
    from aipcc_build.imagebuild.outcomes import ImageResult, Planned, RunResult
    from aipcc_build.matrix import expand, load
    from aipcc_build.plan import make_plan
    from aipcc_build.report.progress import matrix_summary

    monkeypatch.chdir(REPO)
    summary = tmp_path / "summary.md"
    for name in ("GITLAB_CI", "NO_COLOR", "CI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    plan = make_plan(expand(load(MATRICES["demo"])), host="linux/amd64")
    build = plan.builds[0]
    stream = io.StringIO()
    view = MatrixView(stream)
    view(Planned(plan))
    long_line = "x" * 100_000
    view(StatusChanged(build.key, Status.FAILED, "RUN step failed: exit status 1",
                       ("STEP 4/6: RUN pip install", long_line, "ERROR: no wheel"),
                       "logs/base/cpu-debian.log"))
    shown = stream.getvalue()
    containerfile = Path(build.containerfile).relative_to(REPO)
    assert f"::error file={containerfile},title={build.key} failed::RUN step failed" in shown
    assert f"[{build.key}] | ERROR: no wheel" in shown
    assert f"[{build.key}] whole log: logs/base/cpu-debian.log" in shown
    assert max(len(line) for line in shown.splitlines()) < 1000  # a huge line is bounded
    page = summary.read_text()
    assert f"### {build.key} failed" in page and "ERROR: no wheel" in page
    assert "logs/base/cpu-debian.log" in page

    monkeypatch.setenv("COLUMNS", "80")
    matrix_summary(RunResult(tuple(
        ImageResult(b.image, Status.FAILED if b is build else Status.OK, "", platform=b.platform,
                    message="RUN step failed: exit status 1" if b is build else "")
        for b in plan.builds), 0.0, 1.0), None)
    out = capsys.readouterr().out
    assert "RUN step failed: exit status 1" in out
    assert max(len(line) for line in out.splitlines()) <= 80
