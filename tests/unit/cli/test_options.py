"""Options spelled alike on every command: one way for booleans, one meaning of --check, the
global options accepted where a user puts them, refusals in one line, an example in every
--help, and the field-to-option map read from the commands themselves."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import click
import pytest

from aipcc_build.cli import color, option_of_field, options_by_parameter
from aipcc_build.cli.options import EXAMPLES
from aipcc_build.cli.options import cli as group
from tests.support.project import REPO, Project


def test_every_help_ends_with_an_example_that_the_command_accepts() -> None:
    assert set(EXAMPLES) == set(group.commands)
    for name, command in group.commands.items():
        assert command.epilog and EXAMPLES[name] in command.epilog, name
        argv = EXAMPLES[name].split()[1:]
        assert argv[0] == name
        # The example parses: every option it names exists with the value it gives.
        with click.Context(group, info_name="aipcc-build") as parent:
            command.make_context(name, argv[1:], parent=parent, resilient_parsing=True)


def test_tls_verify_is_one_flag_and_the_former_spelling_still_works(cli, project: Project
                                                                    ) -> None:
    matrix = str(project.matrix)
    for spelling in (["--no-tls-verify"], ["--tls-verify", "false"], ["--tls-verify=false"]):
        result = cli("--matrix", matrix, "plan", "--format", "github", "--build-id", "1",
                     *spelling)
        assert result.code == 0, result.err
        assert json.loads(result.out)["tls_verify"] is False
        # podman's, skopeo's and buildah's spelling is no deprecated one; a separate word is.
        deprecated = spelling == ["--tls-verify", "false"]
        assert ("is deprecated: write --tls-verify=false or --no-tls-verify"
                in result.err) == deprecated
        assert bool(result.err) == deprecated, result.err
    on = cli("--matrix", matrix, "plan", "--format", "github", "--build-id", "1",
             "--tls-verify=true")
    assert on.code == 0 and not on.err and json.loads(on.out)["tls_verify"] is True
    assert cli("--matrix", matrix, "plan", "--format", "github", "--build-id", "1",
               "--tls-verify", "maybe").code == 2
    for command in ("matrix", "plan", "validate", "promote", "mirror"):
        options = {o for p in group.commands[command].params
                   for o in (*p.opts, *getattr(p, "secondary_opts", ()))}
        assert {"--tls-verify", "--no-tls-verify"} <= options, command


def test_check_means_drift_on_compat_as_on_render_and_plan(cli, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    stale = tmp_path / "compat.md"
    stale.write_text("old\n")
    drift = cli("compat", "--format", "markdown", "--stable", "-o", str(stale), "--check")
    assert drift.code == 1 and stale.read_text() == "old\n"
    former = cli("compat", "--format", "markdown", "--stable", "-o", str(stale),
                 "--check-drift")
    assert former.code == 1 and "--check-drift is deprecated: write --check" in former.err
    # The EOL check has its own name; --check without -o says where it went.
    assert cli("compat", "--check-eol", "--today", "2020-01-01").code == 0
    alone = cli("compat", "--check")
    assert alone.code == 2 and "--check-eol" in alone.err


def test_matrix_is_accepted_after_the_command(cli, project: Project) -> None:
    before = cli("--matrix", str(project.matrix), "list", "--json")
    after = cli("list", "--json", "--matrix", str(project.matrix))
    assert before.code == after.code == 0
    assert before.out == after.out
    # validate: --matrix after the command is its matrix mode, as before it.
    mode = cli("validate", "--matrix", str(project.matrix), "--only", "nothing-like-it")
    assert "matches nothing in the matrix" in mode.err and mode.code == 2
    both = cli("--matrix", str(project.matrix), "validate", "oci:/nowhere")
    assert both.code == 2 and "not both" in both.err


def test_a_matrix_in_the_environment_does_not_turn_validate_refs_away(
        cli, project: Project, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AIPCC_BUILD_MATRIX", str(project.matrix))
    result = cli("validate", f"oci:{tmp_path / 'missing'}")
    assert "not both" not in result.err


def test_global_version_before_a_command_is_refused_with_the_spelling_that_works(cli) -> None:
    result = cli("--version", "12.8", "list")
    assert result.code == 2
    assert "aipcc-build list --version 12.8" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_bad_value_is_refused_in_one_line(cli, project: Project) -> None:
    result = cli("--matrix", str(project.matrix), "retire", "cuda", "12.8", "--eol", "31/12")
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        "aipcc-build: error: Invalid value for '--eol': '31/12' is not a date YYYY-MM-DD "
        "(see 'aipcc-build retire --help')"]
    assert "Usage:" not in result.err + result.out


def test_retire_takes_a_version_prefix_as_every_other_command(cli, project: Project) -> None:
    result = cli("--matrix", str(project.matrix), "retire", "cuda", "12.8", "--eol",
                 "2026-12-31")
    assert result.code == 0, result.err
    assert "eol: 2026-12-31" in project.matrix.read_text()
    nothing = cli("--matrix", str(project.matrix), "retire", "cuda", "1", "--eol",
                  "2026-12-31")
    assert nothing.code == 2 and "no version 1 (versions: 12.9.1, 12.8.1)" in nothing.err
    several = cli("--matrix", str(project.matrix), "retire", "cuda", "12", "--eol",
                  "2026-12-31")
    assert several.code == 2 and "12 names 12.9.1 and 12.8.1 of cuda" in several.err


def test_in_ci_a_plan_for_jobs_needs_a_build_id(cli, project: Project, monkeypatch) -> None:
    monkeypatch.setenv("CI", "true")
    silent = cli("--matrix", str(project.matrix), "plan", "--format", "gitlab")
    assert silent.code == 2 and "--build-id" in silent.err and "--build-id dev" not in silent.out
    monkeypatch.setenv("CI_PIPELINE_IID", "77")
    told = cli("--matrix", str(project.matrix), "plan", "--format", "gitlab")
    assert told.code == 0 and "--build-id 77" in told.out
    assert "build id 77 (from CI_PIPELINE_IID)" in told.err


def test_every_field_core_errors_name_maps_to_an_option_of_a_command() -> None:
    """The map is read from the commands: each request field the core names in its errors
    becomes the option a user types (the fields a hand-kept table listed, and those it
    missed: --profile, --platform)."""
    expected = {
        "build_id": "--build-id", "registry": "--registry", "capacity": "--capacity",
        "history": "--history", "report": "--report", "junit": "--junit",
        "build_args": "--build-arg NAME=VALUE", "build_timeout": "--build-timeout",
        "push_timeout": "--push-timeout", "push_stall": "--push-stall",
        "allow_eol": "--allow-eol", "native_driver": "--native-driver", "vars": "--var NAME=VALUE",
        "driver": "--driver", "gpu": "--gpu", "compute_capability": "--compute-capability",
        "filters.accelerators": "--accelerator", "filters.versions": "--version",
        "filters.oses": "--os", "filters.kinds": "--kind", "filters.names": "--only",
        "filters.platforms": "--platform", "to": "--to", "source": "--from",
        "wheels": "VARIANT=DIR", "root": "ROOT", "keep": "--keep",
        "changed_since": "--changed-since", "parent_build_id": "--parent-build-id",
        "profile": "--profile", "platforms": "--platform",
    }
    assert {field: option_of_field(field) for field in expected} == expected
    assert option_of_field("metadata.labels") is None
    # No parameter name means two different options on two commands.
    for command in group.commands.values():
        for param in command.params:
            if param.expose_value and isinstance(param, click.Option) and param.name:
                longest = next(o for o in param.opts if o.startswith("--"))
                shown = options_by_parameter()[param.name].split()[0].split("/")[0]
                assert shown == longest, param.name


def test_no_color_leaves_click_unstyled_on_a_terminal(tmp_path) -> None:
    """On a terminal click may style what it prints; NO_COLOR turns that off, FORCE_COLOR
    on, for the contexts the entry point makes."""
    assert color({"NO_COLOR": "1", "FORCE_COLOR": "1"}) is False
    assert color({"FORCE_COLOR": "1"}) is True
    assert color({}) is None
    script = ("from aipcc_build.cli import main\n"
              "main(['compat', '--check-drift', '--help'])")
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    done = subprocess.run([sys.executable, "-c", script], stdout=follower, stderr=follower,
                          env={**env, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}, timeout=60,
                          cwd=tmp_path)
    os.close(follower)
    chunks = []
    while True:  # a pty hands its output over in pieces; EIO once the writer is gone
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    output = b"".join(chunks).decode()
    os.close(leader)
    assert done.returncode == 0
    assert "Example:" in output and "\x1b[" not in output


def test_no_command_shows_the_help_not_an_error(cli) -> None:
    result = cli()
    assert result.code == 2
    assert result.err.startswith("Usage: aipcc-build") and "error:" not in result.err


def test_local_paths_are_refused_as_click_path_refuses_them(cli, tmp_path) -> None:
    """Issue 37: validate's --cache-dir and --requirements and every --authfile of the tools
    are `LocalPath`s (click.Path without its translation look-up): a file where a directory
    is asked for, or the reverse, is refused in one line as click.Path refuses it."""
    from aipcc_build.cli.options import LocalPath

    (tmp_path / "file").write_text("x")
    for kind, given, message in (("directory", "file", "Directory {!r} is a file."),
                                 ("file", ".", "File {!r} is a directory.")):
        path = str(tmp_path / given)
        made = click.Path(file_okay=kind == "file", dir_okay=kind == "directory")
        for path_type in (LocalPath(kind), made):
            with pytest.raises(click.BadParameter) as refused:
                path_type.convert(path, None, None)
            assert refused.value.message == message.format(path)
        assert LocalPath(kind).name == made.name
        assert LocalPath(kind).convert(str(tmp_path / "new"), None, None) == \
            made.convert(str(tmp_path / "new"), None, None)
    # A string, as click.Path gives it: a warm validation loads no pathlib.
    assert LocalPath("directory").convert(str(tmp_path), None, None) == str(tmp_path)
    done = cli("validate", "oci:x", "--cache-dir", str(tmp_path / "file"))
    assert done.code == 2 and "Invalid value for '--cache-dir': Directory" in done.err
    done = cli("validate", "--requirements", str(tmp_path), "--expect", "cpu")
    assert done.code == 2 and "Invalid value for '--requirements': File" in done.err
    done = cli("validate", "oci:x", "--authfile", str(tmp_path))
    assert done.code == 2 and "Invalid value for '--authfile': File" in done.err


def test_help_is_shown_as_click_shows_it(cli) -> None:
    """The -h/--help made without a translation look-up: listed once, last, and shown."""
    for args in ((), ("validate",), ("list",)):
        shown = cli(*args, "--help")
        assert shown.code == 0
        assert shown.out.count("-h, --help") == 1
        assert shown.out.rstrip().split("Options:")[1].count("Show this message and exit.") == 1
        assert cli(*args, "-h").out == shown.out
