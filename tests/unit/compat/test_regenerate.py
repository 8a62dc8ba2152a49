"""Issue 38.8: after a hand edit of a matrix, one command regenerates every derived file
(each matrix's Containerfiles, the Konflux files, the compatibility page, the command
reference), and each drift check names it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.project import REPO


def _project(shipped: Path) -> Path:
    for part in (".tekton", "konflux", "docs"):
        shutil.copytree(REPO / part, shipped / part)
    return shipped


def test_one_command_regenerates_every_derived_file_after_a_hand_edit(shipped, cli,
                                                                     monkeypatch):
    root = _project(shipped)
    monkeypatch.chdir(root)
    aipcc = root / "matrix" / "aipcc.yaml"
    aipcc.write_text(aipcc.read_text().replace("- version: 12.9.1", "- version: 12.9.2"))
    demo = root / "matrix" / "demo.yaml"
    demo.write_text(demo.read_text().replace("12.9.1", "12.9.2"))
    page = root / "docs" / "compatibility.md"
    page_before = page.read_text()

    for check in (("--matrix", str(aipcc), "render", "--check"),
                  ("--matrix", str(aipcc), "compat", "--format", "markdown", "--stable",
                   "-o", str(page), "--check")):
        drifted = cli(*check)
        assert drifted.code == 1
        assert "aipcc-build regenerate" in drifted.err  # the failure names the one command

    found = cli("--matrix", str(aipcc), "regenerate", "--check")
    assert found.code == 1
    assert "drifted: containerfiles/builder/cuda-12.9-ubi9/Containerfile" in found.out
    assert "drifted: containerfiles/demo/base/cuda-12.9-debian/Containerfile.amd64" in found.out
    assert "drifted: docs/compatibility.md" in found.out
    assert page.read_text() == page_before  # a check writes nothing

    done = cli("--matrix", str(aipcc), "regenerate")
    assert done.code == 0, done.err
    assert "12.9.2" in page.read_text()
    # What tox.ini checks now passes, each check as it runs there.
    for matrix in ("aipcc", "demo", "ci"):
        assert cli("--matrix", str(root / "matrix" / f"{matrix}.yaml"), "render",
                   "--check").code == 0, matrix
    assert cli("--matrix", str(aipcc), "plan", "--format", "konflux", "--output-dir",
               str(root), "--check").code == 0
    assert cli("--matrix", str(aipcc), "compat", "--format", "markdown", "--stable", "-o",
               str(page), "--check").code == 0
    assert cli("--matrix", str(aipcc), "regenerate", "--check").code == 0


# One file of each kind tox.ini's drift check covers (`regenerate --check`, which replaced
# the checks of render for each matrix, plan --format konflux, compat and reference).
CHECKED_BY_TOX = [
    "containerfiles/builder/cuda-12.9-ubi9/Containerfile",  # render of matrix/aipcc.yaml
    "containerfiles/demo/base/cuda-12.9-debian/Containerfile.amd64",  # of matrix/demo.yaml
    "containerfiles/ci/aipcc-build/cpu-debian/Containerfile",  # of matrix/ci.yaml
    "containerfiles/ci/aipcc-build/cpu-debian/image-files/pip.conf",  # a file it copies in
    ".tekton/aipcc-3-0-builder-cpu-ubi9-push.yaml",  # plan --format konflux
    "konflux/tenant/component-aipcc-3-0-base-cuda-12-9-el9-6.yaml",
    "docs/compatibility.md",  # compat --format markdown --stable
    "docs/reference/clean.md",  # reference
]


def test_the_one_drift_check_covers_every_file_the_separate_checks_did(shipped, cli,
                                                                        monkeypatch):
    root = _project(shipped)
    monkeypatch.chdir(root)
    aipcc = root / "matrix" / "aipcc.yaml"
    clean = cli("--matrix", str(aipcc), "regenerate", "--check")
    assert clean.code == 0, clean.err
    # Each kind is checked (a kind the project stopped committing would check nothing).
    for what in ("Containerfile(s) of matrix/aipcc.yaml", "Containerfile(s) of matrix/demo.yaml",
                 "Containerfile(s) of matrix/ci.yaml", "Konflux file(s) of matrix/aipcc.yaml",
                 "1 compatibility page of matrix/aipcc.yaml", "reference page(s)"):
        assert f"{what} checked, up to date" in clean.err, what

    for name in CHECKED_BY_TOX:
        path = root / name
        path.write_text(path.read_text() + "# a hand edit\n")
    missing = root / ".tekton" / "aipcc-3-0-builder-cpu-ubi9-pull-request.yaml"
    missing.unlink()
    found = cli("--matrix", str(aipcc), "regenerate", "--check")
    assert found.code == 1
    for name in CHECKED_BY_TOX:
        assert f"drifted: {name}" in found.out, name
    assert f"missing: {missing.relative_to(root)}" in found.out


@pytest.mark.parametrize("gone", [(".tekton", "konflux"), ("docs/compatibility.md",)])
def test_generated_files_all_gone_are_missing_not_up_to_date(shipped, cli, monkeypatch,
                                                             gone):
    """A drift check that found nothing to compare checked nothing: the matrix declares
    what the project commits from it (ci.committed), so every Konflux file deleted, or the
    compatibility page, is drift (it passed before: nothing on the disk named the matrix)."""
    root = _project(shipped)
    monkeypatch.chdir(root)
    for name in gone:
        path = root / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    aipcc = root / "matrix" / "aipcc.yaml"
    found = cli("--matrix", str(aipcc), "regenerate", "--check")
    assert found.code == 1, found.err
    assert all(not (root / name).exists() for name in gone)  # a check writes nothing
    if "konflux" in gone:
        assert "missing: .tekton/aipcc-3-0-builder-cpu-ubi9-push.yaml" in found.out
        assert "missing: konflux/tenant/application.yaml" in found.out
    else:
        assert "missing: docs/compatibility.md" in found.out
    assert cli("--matrix", str(aipcc), "regenerate").code == 0
    assert cli("--matrix", str(aipcc), "regenerate", "--check").code == 0


def test_konflux_files_of_a_matrix_that_is_gone_are_stale(shipped, cli, monkeypatch):
    """The matrix they were generated from renamed (and no longer declaring them): no plan
    ran, so no check looked at them, and they passed as up to date."""
    root = _project(shipped)
    monkeypatch.chdir(root)
    aipcc = root / "matrix" / "aipcc.yaml"
    product = root / "matrix" / "product.yaml"
    product.write_text("\n".join(line for line in aipcc.read_text().splitlines()
                                 if "committed:" not in line) + "\n")
    aipcc.unlink()
    found = cli("--matrix", str(product), "regenerate", "--check")
    assert found.code == 1, found.err
    assert "stale: .tekton/aipcc-3-0-builder-cpu-ubi9-push.yaml" in found.out
    assert "stale: konflux/tenant/application.yaml" in found.out
    assert (root / ".tekton" / "aipcc-3-0-builder-cpu-ubi9-push.yaml").exists()
    assert cli("--matrix", str(product), "regenerate").code == 0
    assert not list((root / ".tekton").iterdir())
    assert cli("--matrix", str(product), "regenerate", "--check").code == 0
