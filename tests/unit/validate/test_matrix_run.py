"""`validate --matrix` as a gate: it fails unless every selected image was checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipcc_build.validate import Outcome, Target
from aipcc_build.validate.matrix_run import (
    LOCAL,
    PUSHED,
    MatrixValidation,
    ValidationRun,
    matrix_targets,
    validate_matrix,
)
from tests.support.fakes import RecordingRunner

REPO = Path(__file__).resolve().parents[3]
AIPCC = str(REPO / "matrix" / "aipcc.yaml")

CLEAN = Outcome(Target("oci:a"))  # judged, nothing found: clean
MISSING = Outcome(Target("oci:b"), skipped=True)
UNREADABLE = Outcome(Target("oci:c"), error="broken")


@pytest.mark.parametrize(("outcomes", "allow_missing", "code", "counts"), [
    ((CLEAN,), False, 0, (1, 0, 0)),
    ((CLEAN, MISSING), False, 1, (1, 1, 0)),
    ((CLEAN, MISSING), True, 0, (1, 1, 0)),
    ((MISSING, MISSING), False, 1, (0, 2, 0)),
    # Nothing checked is never a pass, missing images allowed or not.
    ((MISSING, MISSING), True, 1, (0, 2, 0)),
    ((), True, 1, (0, 0, 0)),
    ((CLEAN, MISSING, UNREADABLE), True, 2, (1, 1, 1)),
])
def test_a_gate_fails_closed(outcomes: tuple[Outcome, ...], allow_missing: bool, code: int,
                             counts: tuple[int, int, int]) -> None:
    run = ValidationRun(outcomes, allow_missing)
    assert run.exit_code == code
    assert (run.validated, run.skipped, run.failed) == counts


def test_targets_are_the_local_tags_or_the_pushed_references() -> None:
    local = matrix_targets(MatrixValidation(AIPCC, build_id="7"))
    pushed = matrix_targets(MatrixValidation(AIPCC, build_id="7", where=PUSHED,
                                             registry="127.0.0.1:5000/ns"))
    assert local and all(t.ref.startswith("containers-storage:") for t in local)
    assert all(t.ref.startswith("docker://127.0.0.1:5000/ns/") and t.ref.endswith(":3.0-7")
               for t in pushed)
    # One pushed reference per image (a list holds its platforms), one local tag per build.
    assert len({t.name for t in pushed}) == len(pushed) <= len(local)
    assert all(t.only_if_present and t.expect is not None for t in (*local, *pushed))
    assert MatrixValidation(AIPCC, build_id="7").where == LOCAL


def test_a_registry_that_cannot_be_asked_fails_the_image_not_the_run() -> None:
    from aipcc_build.tools.skopeo import Skopeo

    def answer(argv: list[str]) -> tuple[int, bytes, bytes]:
        if "cpu" in argv[-1]:
            return 1, b"", b"manifest unknown"
        return 1, b"", b"dial tcp 127.0.0.1:9: connection refused"

    request = MatrixValidation(AIPCC, build_id="7", where=PUSHED, registry="127.0.0.1:9/ns",
                               allow_missing=True)
    run = validate_matrix(request, skopeo=Skopeo(RecordingRunner(answer)))
    assert run.skipped and run.failed and not run.validated
    assert run.exit_code == 2
    assert all("connection refused" in (o.error or "") for o in run.outcomes if not o.skipped)


def test_validate_matrix_with_nothing_in_local_storage_exits_1(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from aipcc_build.tools.skopeo import Skopeo

    # Local storage holds none of the matrix's images (skopeo: "does not exist").
    monkeypatch.setattr(Skopeo, "exists", lambda self, ref: False)
    done = cli("validate", "--matrix", AIPCC, "--build-id", "nothing-here", "--json")
    assert done.code == 1, done.err
    summary = json.loads(done.out)["summary"]
    assert summary["validated"] == 0 and summary["failed"] == 0 and summary["skipped"] > 0
    plain = cli("validate", "--matrix", AIPCC, "--build-id", "nothing-here", "--allow-missing")
    assert plain.code == 1 and "nothing was checked" in plain.err
    assert cli("validate", "oci:x", "--allow-missing").code == 2  # --matrix only
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    annotated = cli("validate", "--matrix", AIPCC, "--build-id", "nothing-here")
    assert annotated.code == 1
    assert "::error title=aipcc-build validate::" in annotated.out
    assert "not found" in annotated.out


def _matrix_with_archs(tmp_path: Path, archs: str) -> str:
    source = REPO / "tests" / "unit" / "compat" / "data" / "matrix-13.yaml"
    text = source.read_text().replace("{version: 13.0.2, eol: 2027-08-31}",
                                      f"{{version: 13.0.2, eol: 2027-08-31, gpu_archs: {archs}}}")
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    (tmp_path / "templates").symlink_to(source.parent / "templates")
    return str(path)


def test_each_target_must_run_on_its_matrix_entrys_gpu_archs(tmp_path: Path) -> None:
    matrix = _matrix_with_archs(tmp_path, "[sm_80, '9.0', gfx942]")
    targets = matrix_targets(MatrixValidation(matrix, build_id="7", where=PUSHED))
    archs = {t.name: t.gpu_archs for t in targets}
    assert archs["builder/cuda-13.0-ubi9"] == ("sm_80", "sm_90", "gfx942")
    assert archs["builder/cuda-12.9-ubi9"] == ()
    replaced = matrix_targets(MatrixValidation(matrix, build_id="7", where=PUSHED,
                                               gpu_archs=("sm_120",)))
    assert {t.gpu_archs for t in replaced} == {("sm_120",)}
    # coverage findings name where the list came from
    sources = {t.name: t.gpu_source for t in targets}
    assert sources["builder/cuda-13.0-ubi9"] == "gpu_archs of the matrix's cuda 13.0.2 entry"
    given = matrix_targets(MatrixValidation(matrix, build_id="7", where=PUSHED,
                                            gpu_archs=("sm_120",),
                                            gpu_source="--expect-gpu-archs"))
    assert {t.gpu_source for t in given} == {"--expect-gpu-archs"}


def test_a_built_image_is_judged_against_its_matrix_entrys_gpu_archs_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aipcc_build.matrix import EVERYTHING, expand, load
    from aipcc_build.validate import pipeline

    matrix = _matrix_with_archs(tmp_path, "[sm_80]")
    [spec] = [image for image in expand(load(matrix), build_id="7", filters=EVERYTHING)
              if image.key == "builder/cuda-13.0-ubi9"]
    judged: list[Target] = []
    monkeypatch.setattr(pipeline, "validate_targets",
                        lambda targets, **_: judged.extend(targets) or [Outcome(targets[0])])
    pipeline.validate_built(spec, "sha256:abc")
    [target] = judged
    assert target.gpu_archs == ("sm_80",)
    assert target.gpu_source == "gpu_archs of the matrix's cuda 13.0.2 entry"


def test_a_gpu_arch_the_reader_cannot_place_is_refused_naming_the_field(
        tmp_path: Path) -> None:
    from aipcc_build.errors import InputError

    matrix = _matrix_with_archs(tmp_path, "[volta]")
    with pytest.raises(InputError, match="'volta' is not a GPU architecture") as raised:
        matrix_targets(MatrixValidation(matrix, build_id="7", where=PUSHED))
    assert raised.value.field == "accelerators.cuda.versions[0].gpu_archs[0]"
    assert raised.value.file == matrix and raised.value.line
