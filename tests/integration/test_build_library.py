"""`build_matrix` as a library: a real busybox build driven without click (issue 10)."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from aipcc_build.imagebuild.build_report import read_release
from aipcc_build.imagebuild.matrix_build import MatrixBuild, build_matrix
from aipcc_build.imagebuild.outcomes import Event, Planned, Status, StatusChanged
from aipcc_build.imagebuild.schedule_options import ScheduleOptions

from .test_matrix_build import write_matrix

pytestmark = pytest.mark.integration


def test_build_matrix_runs_a_real_build_without_the_cli(tmp_path: Path,
                                                        unique_base: tuple[str, str],
                                                        namespace: str) -> None:
    base, _ = unique_base
    matrix = write_matrix(tmp_path, base, {"12.8.1": {"sleep": 0}})
    events: list[Event] = []
    result = build_matrix(
        MatrixBuild(matrix_path=str(matrix), registry=namespace, build_id="lib",
                    report_path=str(tmp_path / "report.json"),
                    schedule=ScheduleOptions(jobs=2, log_dir=str(tmp_path / "logs"), push=True,
                                             tls_verify=False)),
        events.append, threading.Event(), validate=None)
    assert result.ok, [(i.image.key, i.status, i.message) for i in result.images]
    assert isinstance(events[0], Planned)
    finals = [e.key for e in events if isinstance(e, StatusChanged) and e.status is Status.OK]
    assert sorted(finals) == ["base/cuda-12.8-bb", "child/cuda-12.8-bb"]
    child = result.images[1]
    assert child.digest.startswith("sha256:")
    pushed = subprocess.run(["skopeo", "inspect", "--tls-verify=false",
                             f"docker://{child.image.reference}", "--format", "{{.Digest}}"],
                            check=True, capture_output=True, text=True).stdout.strip()
    assert pushed == child.digest
    # Issue 38.8: build_matrix writes the build report itself, for a library caller too.
    assert result.report_path == str(tmp_path / "report.json")
    report = read_release(result.report_path)
    assert report.build_id == "lib"
    assert {entry.key: entry.digest for entry in report.images}[child.image.key] == child.digest
