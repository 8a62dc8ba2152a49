"""plan --changed-since in a temporary git repository: an image is selected when its matrix
entry, template (or a template it imports), Containerfile or build context changed, and
so is everything built FROM it. Other files select nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipcc_build.tools import runner as runner_module
from tests.support.project import git

BUILDERS = {"builder/cuda-12.9-ubi9", "builder/cuda-12.8-ubi9", "builder/rocm-6.4-ubi9",
            "builder/rocm-6.3-ubi9", "builder/cpu-ubi9"}
BASES = {"base/cuda-12.9-el9.6", "base/cuda-12.8-el9.6", "base/cpu-el9.6"}
DEVELS = {"devel/cuda-12.9-el9.6", "devel/cuda-12.8-el9.6", "devel/cpu-el9.6"}


@pytest.fixture
def changed(repo: Path, cli):
    """Keys `plan --changed-since HEAD` selects in REPO's work tree (after an edit)."""
    def plan_keys(*extra: str) -> set[str]:
        result = cli("--matrix", str(repo / "matrix/aipcc.yaml"), "plan",
                     "--changed-since", "HEAD", *extra)
        assert result.code == 0, result.err
        return {image["key"] for image in json.loads(result.out)["images"]}

    return plan_keys


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_nothing_changed_selects_nothing(changed):
    assert changed() == set()


def test_template_edit_selects_its_kind_and_dependents(repo, changed):
    edit(repo / "templates/base.Containerfile.j2", "python3.12-pip",
         "python3.12-pip python3.12-wheel")
    assert changed() == BASES | DEVELS  # devel is built FROM base


def test_dependent_template_edit_selects_only_that_kind(repo, changed):
    edit(repo / "templates/devel.Containerfile.j2", "cmake", "cmake ninja-build")
    assert changed() == DEVELS


def test_imported_template_edit_selects_every_kind_importing_it(repo, changed):
    edit(repo / "templates/_toolkit.j2", "dnf clean all", "dnf clean all && rm -rf /var/cache")
    assert changed() == BUILDERS | BASES | DEVELS


def test_matrix_version_edit_selects_that_versions_images(repo, changed):
    edit(repo / "matrix/aipcc.yaml", "cudnn: 9.8.0.87", "cudnn: 9.8.0.88")
    assert changed() == {"builder/cuda-12.8-ubi9", "base/cuda-12.8-el9.6",
                         "devel/cuda-12.8-el9.6"}


def test_matrix_flow_entry_edit_selects_that_version(repo, changed):
    edit(repo / "matrix/aipcc.yaml", "{version: 6.3.4}", "{version: 6.3.5}")
    assert changed() == {"builder/rocm-6.3-ubi9"}


def test_matrix_kind_and_os_edits(repo, changed):
    edit(repo / "matrix/aipcc.yaml", "resources: {cpu: 2, memory: 4Gi}",
         "resources: {cpu: 2, memory: 8Gi}")
    assert changed() == DEVELS
    git(repo, "checkout", "--", ".")
    edit(repo / "matrix/aipcc.yaml", "ubi9/ubi:9.6}", "ubi9/ubi:9.7}")
    assert changed() == BUILDERS


def test_matrix_top_level_edit_selects_everything(repo, changed):
    edit(repo / "matrix/aipcc.yaml", 'version: "3.0"', 'version: "3.1"')
    assert changed() == BUILDERS | BASES | DEVELS


def test_matrix_comment_edit_selects_nothing(repo, changed):
    edit(repo / "matrix/aipcc.yaml", "# llm-d needs 12.9", "# llm-d and vLLM 0.11 need 12.9")
    assert changed() == set()


def test_removing_a_version_selects_no_other_image(repo, changed, cli):
    """The removed lines belong to the removed entry in the revision's file: they select
    no image (none is left), not the entries around the deletion point (they selected the
    12.9 and ROCm images before)."""
    result = cli("--matrix", str(repo / "matrix/aipcc.yaml"), "retire", "cuda", "12.8.1",
                 "--remove")
    assert result.code == 0, result.err
    assert changed() == set()


def test_adding_a_version_selects_exactly_its_images(repo, changed, cli):
    result = cli("--matrix", str(repo / "matrix/aipcc.yaml"), "add-version", "cuda", "13.0.1",
                 "--min-driver", "580.82.07")
    assert result.code == 0, result.err
    git(repo, "add", "-A")
    assert changed() == {"builder/cuda-13.0-ubi9", "base/cuda-13.0-el9.6",
                         "devel/cuda-13.0-el9.6"}


def test_an_eol_date_or_driver_alone_rebuilds_nothing(repo, changed, cli):
    """`eol`, `native_driver` and `gpu_archs` reach no build: a change to them alone, block
    or flow style, selects no image; with another field, the entry's images."""
    result = cli("--matrix", str(repo / "matrix/aipcc.yaml"), "retire", "cuda", "12.8.1",
                 "--eol", "2026-12-31")
    assert result.code == 0, result.err
    assert changed() == set()
    edit(repo / "matrix/aipcc.yaml", "native_driver: 575.57.08", "native_driver: 575.57.09")
    edit(repo / "matrix/aipcc.yaml", "{version: 6.3.4}", "{version: 6.3.4, eol: 2026-06-30}")
    assert changed() == set()
    edit(repo / "matrix/aipcc.yaml", "{version: 6.3.4, eol: 2026-06-30}",
         "{version: 6.3.4, eol: 2026-06-30, vars: {x: y}}")
    assert changed() == {"builder/rocm-6.3-ubi9"}


def test_a_removed_line_selects_the_entry_that_held_it(repo, changed):
    edit(repo / "matrix/aipcc.yaml", "        vars: {cudnn: 9.8.0.87}\n", "")
    assert changed() == {"builder/cuda-12.8-ubi9", "base/cuda-12.8-el9.6",
                         "devel/cuda-12.8-el9.6"}


def test_readme_edit_selects_nothing(repo, changed):
    (repo / "README.md").write_text("# images\n\nMore words.\n")
    (repo / "docs").mkdir()
    (repo / "docs/new.md").write_text("new\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "docs")
    assert changed() == set()


def test_context_and_containerfile_edits(repo, changed):
    (repo / "containerfiles/builder/cpu-ubi9/extra.conf").write_text("x\n")
    git(repo, "add", "-A")  # untracked files are not in `git diff`: add the new one
    edit(repo / "containerfiles/base/cpu-el9.6/Containerfile", "USER 1001", "USER 1002")
    assert changed() == {"builder/cpu-ubi9", "base/cpu-el9.6", "devel/cpu-el9.6"}


def test_committed_changes_since_an_older_revision(repo, changed, cli):
    base = git(repo, "rev-parse", "HEAD").strip()
    edit(repo / "templates/devel.Containerfile.j2", "cmake", "cmake ninja-build")
    git(repo, "commit", "-qam", "devel: ninja")
    (repo / "README.md").write_text("# images\n\nchanged\n")
    git(repo, "commit", "-qam", "readme")
    result = cli("--matrix", str(repo / "matrix/aipcc.yaml"), "plan", "--changed-since", base,
                 "--accelerator", "cuda")
    keys = [image["key"] for image in json.loads(result.out)["images"]]
    assert keys == ["devel/cuda-12.9-el9.6", "devel/cuda-12.8-el9.6"]


def test_git_is_called_a_fixed_number_of_times(repo, changed, monkeypatch):
    calls: list[list[str]] = []
    real = runner_module.ProcessRunner.run

    def counting(self, argv, **options):  # type: ignore[no-untyped-def]
        if argv[0] == "git":
            calls.append(list(argv[3:]))  # after "git -C DIR"
        return real(self, argv, **options)

    monkeypatch.setattr(runner_module.ProcessRunner, "run", counting)
    edit(repo / "matrix/aipcc.yaml", "cudnn: 9.8.0.87", "cudnn: 9.8.0.88")
    edit(repo / "templates/_toolkit.j2", "dnf clean all", "dnf clean all ")
    changed()
    # top level, the revision's commit, changed names, the matrix file's hunks and its text
    # at the revision: never one call per image.
    assert [args[0] for args in calls] == ["rev-parse", "rev-parse", "diff", "diff", "show"]


def test_unknown_revision_is_a_clear_error(repo, cli):
    result = cli("--matrix", str(repo / "matrix/aipcc.yaml"), "plan",
                 "--changed-since", "no-such-rev")
    assert result.code == 2
    assert "'no-such-rev' is not a commit of this repository" in result.err


# ---- issue 22.10: a revision is never read as an option -----------------------------------

@pytest.mark.parametrize("value", ["--output={victim}", "-p", "--no-index", "--", "HEAD~99"])
def test_a_value_that_is_no_revision_is_refused_and_touches_nothing(
        repo: Path, cli, value: str) -> None:
    victim = repo / "victim.txt"
    victim.write_text("precious\n")
    done = cli("--matrix", str(repo / "matrix/aipcc.yaml"), "plan", "--changed-since",
               value.format(victim=victim))
    assert done.code == 2, (done.code, done.out, done.err)
    assert "Traceback" not in done.err
    assert "--changed-since" in done.err and "not a commit" in done.err, done.err
    assert victim.read_text() == "precious\n"
