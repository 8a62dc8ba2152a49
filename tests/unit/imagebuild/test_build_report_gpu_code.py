"""The GPU code the validator read, written into the build report and read back; a report
whose record of it is malformed is refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipcc_build.errors import InputError
from aipcc_build.imagebuild import build_report
from aipcc_build.imagebuild.outcomes import ImageResult, RunResult, Status
from aipcc_build.validate.results import DeviceCode
from tests.unit.compat.compat_images import image


def test_the_gpu_code_read_at_build_time_round_trips(tmp_path: Path) -> None:
    code = (DeviceCode("/x/liba.so", ("sm_80",), ("compute_90",), (), "1 fatbinary: 2 entries"),
            DeviceCode("/x/libb.so", gfx=("gfx942",)))
    built = image("cuda", "12.9.1")
    result = RunResult(images=(
        ImageResult(built, Status.OK, "log", image_id="i", toolkits={}, gpu_code=code),),
        start=0.0, end=1.0)
    path = tmp_path / "report.json"
    build_report.write(result, "42", str(path))
    [entry] = build_report.read_release(path).images
    assert entry.gpu_code == tuple(DeviceCode(c.path, c.sass, c.ptx, c.gfx) for c in code)


@pytest.mark.parametrize("files", [{"path": "x"}, [{"sass": ["sm_80"]}],
                                   [{"path": "/x", "sass": "sm_80"}],
                                   [{"path": "/x", "gfx": [1]}]])
def test_a_malformed_gpu_code_record_is_refused_naming_its_field(
        tmp_path: Path, files: object) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"images": [{"key": "builder/x", "status": "ok",
                                            "gpu_code_files": files}]}))
    with pytest.raises(InputError) as raised:
        build_report.read_release(path)
    assert raised.value.field == "images[0].gpu_code_files"
