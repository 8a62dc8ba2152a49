"""`aipcc-build compat` and `aipcc-build select` end to end, through `main` (exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipcc_build.cli import main

DATA = Path(__file__).parent / "data"
MATRIX = str(DATA / "matrix-13.yaml")
from tests.support.project import REPO  # noqa: E402


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", MATRIX, *args])
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out, err


def test_compat_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "compat", "--format", "json", "--today", "2025-09-01")
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == 1
    rows = {r["version"]: r for r in data["images"]}
    assert [r["version"] for r in data["images"]] == ["13.0.2", "12.9.1", "12.8.1", "12.6.3",
                                                      "6.4.1", None]
    assert rows["12.8.1"]["eol_status"] == "eol-soon"
    assert rows["12.6.3"]["eol_status"] == "eol"
    assert rows["13.0.2"]["min_driver"] == "580"
    assert rows["13.0.2"]["native_driver"] == "580.95.05"
    assert rows["12.9.1"]["fromager_variant"] == "cuda-ubi9"


def test_compat_check_lists_images_near_or_past_eol(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "compat", "--check-eol", "--today", "2025-09-01")
    assert code == 1
    assert "cuda-12.8-ubi9: cuda 12.8.1 reaches end of life on 2025-10-15 (in 44 days)" in out
    assert "cuda-12.6-ubi9: cuda 12.6.3 reached end of life on 2025-06-30 (63 days ago)" in out
    assert "2 past EOL or within 90 days" in err
    code, out, _ = run(capsys, "compat", "--check-eol", "--today", "2025-01-01",
                       "--warn-days", "30")
    assert (code, out) == (0, "")


def test_compat_with_build_report_digests(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({"images": [{"name": "cuda-13.0-ubi9", "kind": "builder",
                                              "reference": "r", "digest": "sha256:0123",
                                              "status": "ok"}]}))
    code, out, _ = run(capsys, "compat", "--format", "markdown", "--report", str(report))
    assert code == 0
    assert "| digest |" in out and "sha256:0123" in out


def test_compat_joins_the_reports_of_one_builds_ci_jobs(capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path) -> None:
    def report(name: str, digest: str) -> str:
        path = tmp_path / "reports" / f"{name}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps({"build_id": "42", "images": [
            {"name": name, "kind": "builder", "reference": f"r/{name}:3.0-42",
             "digest": digest, "status": "ok"}]}))
        return str(path)

    first = report("cuda-13.0-ubi9", "sha256:0123")
    second = report("cuda-12.9-ubi9", "sha256:4567")
    for given in (["--report", first, "--report", second], ["--report", str(tmp_path /
                                                                             "reports")]):
        code, out, _ = run(capsys, "compat", "--format", "json", *given)
        assert code == 0
        digests = {row["name"]: row["digest"] for row in json.loads(out)["images"]}
        assert digests == {"cuda-13.0-ubi9": "sha256:0123", "cuda-12.9-ubi9": "sha256:4567"}
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"build_id": "43", "images": [
        {"name": "cpu-ubi9", "kind": "builder", "reference": "r/cpu-ubi9:3.0-43",
         "digest": "sha256:89ab", "status": "ok"}]}))
    code, _, err = run(capsys, "compat", "--report", first, "--report", str(other))
    assert code == 2 and "build_id" in err and "Traceback" not in err


def test_compat_html_written_atomically(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    page = tmp_path / "compat.html"
    code, _, err = run(capsys, "compat", "--format", "html", "-o", str(page),
                       "--today", "2025-09-01")
    assert code == 0 and "wrote" in err
    assert "(outside the working directory)" in err  # issue 16.14: --output says so
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "http://" not in text and "https://" not in text and "<script" not in text
    assert text.count('data-status="eol"') == 1 and text.count('data-status="eol-soon"') == 1


def test_compat_html_shows_each_pull_reference_by_digest_and_the_release(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Issue 38.6: the page cut digests to 12 characters and showed no pull reference, no
    platforms, no product, version or build id."""
    digest = "sha256:" + "ab" * 32
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({
        "build_id": "417", "product": {"name": "aipcc", "version": "3.0"},
        "images": [{"name": "cuda-13.0-ubi9", "kind": "builder",
                    "reference": "quay.io/aipcc/builder/cuda-13.0-ubi9:3.0-417",
                    "digest": digest, "status": "ok",
                    "platform": "linux/arm64"}]}))
    code, out, err = run(capsys, "compat", "--format", "html", "--report", str(report))
    assert code == 0, err
    assert f"<code>quay.io/aipcc/builder/cuda-13.0-ubi9@{digest}</code>" in out
    assert '<div class="platforms">linux/arm64</div>' in out
    assert '<span class="product">aipcc</span> <span class="version">3.0</span>' in out
    assert 'build <span class="build-id">417</span>' in out


def test_select_flags_and_node_file_agree(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--json", "--today", "2025-09-01")
    code, by_flags, _ = run(capsys, "select", "--gpu", "H100", "--driver", "550.54.15", *args)
    assert code == 0
    code, by_node, _ = run(capsys, "select", "--node", str(DATA / "node-h100-gfd.json"), *args)
    assert code == 0
    flags, node = json.loads(by_flags), json.loads(by_node)
    assert flags["runnable"] == node["runnable"] and flags["excluded"] == node["excluded"]
    assert [(r["version"], r["mode"]) for r in flags["runnable"]] == [
        ("12.9.1", "minor-version-compatibility"), ("12.8.1", "minor-version-compatibility"),
        (None, "cpu-only")]


def test_select_text_marks_minor_version_compatibility(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The lines fit the terminal's width: pin the one this test's first assertion assumes
    # (a pipe's 120) rather than take whatever terminal, COLUMNS or xdist worker runs it.
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = run(capsys, "select", "--gpu", "H100", "--driver", "550.54.15",
                       "--accelerator", "cuda", "--today", "2025-09-01")
    assert code == 0
    assert "cuda-12.9-ubi9:3.0-dev  (builder, cuda 12.9.1, ubi9)  [minor-version " \
           "compatibility]\n      the driver is below 575.57.08 (native): no JIT of newer " \
           "PTX\n" in out
    assert ("driver too old: needs >= 580.95.05 natively, >= 580 under minor-version "
            "compatibility; node has 550.54.15 (the image carries no forward-compat "
            "package)") in " ".join(out.split())  # wrapped to fit the width
    assert "rocm" not in out  # filtered out, not excluded


def test_select_emit_k8s(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "select", "--gpu", "A100", "--driver", "580.95.05",
                       "--emit", "k8s", "--today", "2025-09-01")
    assert code == 0
    assert "image: quay.io/aipcc/builder/cuda-13.0-ubi9:3.0-dev" in out
    assert "nvidia.com/cuda.driver.major" in out and "nodeSelectorTerms" in out


def test_select_with_nothing_runnable_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "select", "--gpu", "H100", "--driver", "520.61.05",
                       "--accelerator", "cuda")
    assert code == 1 and "no image of the matrix runs on H100" in err


@pytest.mark.parametrize(("args", "message"), [
    (("--gpu", "H1000", "--driver", "550.54.15"), "did you mean 'H100'?"),
    (("--gpu", "H100", "--driver", "latest"), "'latest' is not a driver version"),
    (("--node", str(DATA / "node-cpu.json")), "no GPU labels"),
    (("--compute-capability", "9", "--driver", "550.54.15"), "not a compute capability"),
])
def test_select_bad_input_exits_2(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                                  message: str) -> None:
    code, _, err = run(capsys, "select", *args)
    assert code == 2 and message in err


def test_committed_compatibility_doc_is_up_to_date(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/compatibility.md is generated; CI runs the same command as this test."""
    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit) as exit_:
        main(["compat", "--format", "markdown", "--stable", "-o", "docs/compatibility.md",
              "--check"])
    _, err = capsys.readouterr()
    assert exit_.value.code == 0, err


def _report_with_code(tmp_path: Path, files: list[dict[str, object]]) -> Path:
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({"images": [
        {"name": "cuda-12.9-ubi9", "kind": "builder", "reference": "r", "digest": "sha256:1",
         "status": "ok", "gpu_code_files": files},
        {"name": "cuda-12.8-ubi9", "kind": "builder", "reference": "q", "digest": "sha256:2",
         "status": "ok"}]}))
    return report


def test_compat_shows_measured_gpu_code_beside_the_declared_and_marks_gaps(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = _report_with_code(tmp_path, [
        {"path": "/x/libnew.so", "sass": ["sm_80", "sm_90"], "ptx": ["compute_90"]},
        {"path": "/x/libhip.so", "gfx": ["gfx942"]}])
    code, out, _ = run(capsys, "compat", "--format", "json", "--report", str(report),
                       "--today", "2025-09-01")
    assert code == 0
    rows = {r["version"]: r for r in json.loads(out)["images"]}
    measured = rows["12.9.1"]
    # by family and number, SASS before PTX of one number: never compute_90 before sm_80
    assert measured["measured_architectures"] == ["sm_80", "sm_90", "compute_90", "gfx942"]
    # the data file's sm_75 (Turing) has no code in libnew.so; sm_86 runs its sm_80 code
    assert "sm_75" in measured["architectures_without_code"]
    assert "sm_86" not in measured["architectures_without_code"]
    assert rows["12.8.1"]["measured_architectures"] is None  # not recorded: not measured
    code, out, _ = run(capsys, "compat", "--format", "markdown", "--report", str(report),
                       "--today", "2025-09-01")
    assert "; measured: sm_80 sm_90 compute_90 gfx942; NO CODE for sm_50 " in out
    for shown in ("table", "html"):
        code, out, _ = run(capsys, "compat", "--format", shown, "--wide", "--report",
                           str(report), "--today", "2025-09-01")
        assert code == 0 and "measured: sm_80 sm_90 compute_90 gfx942" in " ".join(
            out.split()), shown


def test_select_refuses_an_image_whose_library_has_no_code_for_the_node(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = _report_with_code(tmp_path, [
        {"path": "/x/libnew.so", "sass": ["sm_90"], "ptx": []},
        {"path": "/x/libjit.so"}])
    args = ("--driver", "575.57.08", "--json", "--today", "2025-09-01", "--accelerator", "cuda")
    code, out, _ = run(capsys, "select", "--gpu", "A100", "--report", str(report), *args)
    answer = json.loads(out)
    [refused] = [e for e in answer["excluded"] if e["version"] == "12.9.1"]
    assert any("/x/libnew.so has no code that runs on sm_80 (SASS sm_90)" in r["detail"]
               for r in refused["reasons"]), refused
    assert "12.8.1" in [r["version"] for r in answer["runnable"]]  # nothing recorded
    code, out, _ = run(capsys, "select", "--gpu", "H100", "--report", str(report), *args)
    assert "12.9.1" in [r["version"] for r in json.loads(out)["runnable"]]


def test_the_compat_documents_show_each_releases_driver_branches_and_their_eol(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "compat", "--format", "markdown", "--today", "2025-09-01")
    assert code == 0 and "## Driver branches" in out
    assert "- CUDA 13.0: R535 (long-term, EOL 2026-06), R550, R565, R570 (EOL 2026-02), " \
           "R575\n" in out
    assert "- CUDA 12.6: not listed: no forward compatibility" in out
    page = tmp_path / "grid.html"
    code, _, _ = run(capsys, "compat", "--format", "html", "-o", str(page),
                     "--today", "2025-09-01")
    assert code == 0
    assert "forward compat: R470, R535 (long-term, EOL 2026-06)" in page.read_text()


def test_select_with_a_report_answers_with_the_references_the_build_made(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The images a report's build made and measured, under the references it pushed them
    to: not the matrix's development tags (3.0-dev), and not the images it did not make."""
    built = "registry.example:5000/aipcc/builder/cuda-12.9-ubi9:3.0-42"
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({"build_id": "42", "images": [
        {"name": "cuda-12.9-ubi9", "kind": "builder", "reference": built,
         "digest": "sha256:" + "1" * 64, "status": "ok", "platforms": ["linux/amd64"],
         "gpu_code_files": [{"path": "/x/lib.so", "sass": ["sm_90"]}]}]}))
    args = ("select", "--gpu", "H100", "--driver", "575.57.08", "--today", "2025-09-01",
            "--accelerator", "cuda", "--report", str(report))
    code, out, _ = run(capsys, *args, "--json")
    assert code == 0
    answer = json.loads(out)
    assert [(r["reference"], r["version"]) for r in answer["runnable"]] == [(built, "12.9.1")]
    assert answer["excluded"] == []  # 13.0.2, 12.8.1, 12.6.3: not made by this build
    code, out, _ = run(capsys, *args)
    assert code == 0 and f"1. {built}" in out and "3.0-dev" not in out, out
