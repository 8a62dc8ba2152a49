"""docs/reference/ is generated from the click commands: committed, checked for drift as
render's Containerfiles are, and never replacing a page it did not write."""

from __future__ import annotations

import pytest

from aipcc_build.cli.options import cli as group
from aipcc_build.cli.reference import HEADER, pages
from tests.support.project import REPO


def test_committed_reference_is_up_to_date(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """tox runs the same check."""
    monkeypatch.chdir(REPO)
    result = cli("reference", "--check")
    assert result.code == 0, result.err


def test_every_visible_command_has_a_page_with_each_option_and_its_example() -> None:
    texts = pages(REPO / "docs" / "reference")
    visible = {name for name, command in group.commands.items() if not command.hidden}
    assert set(texts) == {f"{name}.md" for name in visible} | {"README.md"}
    for name in visible:
        page = texts[f"{name}.md"]
        assert page.startswith(HEADER)
        for param in group.commands[name].params:
            for spelled in getattr(param, "opts", ()):
                if spelled.startswith("--") and not getattr(param, "hidden", False):
                    assert f"`{spelled}`" in page, (name, spelled)
        assert "## Example" in page, name
    assert "reference" not in {n.removesuffix(".md") for n in texts}


def test_drift_is_found_and_fixed_and_a_hand_written_page_is_refused(cli, tmp_path) -> None:
    out = tmp_path / "reference"
    assert cli("reference", "--output-dir", str(out)).code == 0
    (out / "list.md").write_text(HEADER + "edited by hand\n")
    (out / "gone.md").write_text(HEADER + "a command that left\n")
    drift = cli("reference", "--output-dir", str(out), "--check")
    assert drift.code == 1
    assert "drifted: " in drift.out and "list.md" in drift.out and "stale: " in drift.out
    assert cli("reference", "--output-dir", str(out)).code == 0
    assert not (out / "gone.md").exists()
    assert cli("reference", "--output-dir", str(out), "--check").code == 0
    (out / "list.md").write_text("# my own notes\n")
    refused = cli("reference", "--output-dir", str(out))
    assert refused.code == 2 and "lacks the generated header" in refused.err
    assert (out / "list.md").read_text() == "# my own notes\n"


def test_the_pages_link_the_projects_own_how_to_pages_wherever_the_package_is(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Installed in site-packages (tox, CI), the pages are what a checkout writes: the
    links follow the project the pages are written into, not the package's location."""
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "list.md").write_text("# list\n")
    texts = pages(tmp_path / "reference")
    assert "../commands/list.md" in texts["list.md"]
    assert "../commands/" not in texts["render.md"]
