"""Before the first build, each image's wheel index must answer: a variant nobody
published (a new CUDA version's, before its wheels) failed the build 12 s in, on pip's
"No matching distribution found". Checked against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import http.server
import re
import socket
from pathlib import Path

import pytest

from aipcc_build.errors import CheckFailed
from aipcc_build.imagebuild.preflight import check_wheel_indexes
from aipcc_build.matrix import expand, load
from aipcc_build.tools.retry import Retry
from tests.support.http_server import serving
from tests.support.project import shipped_project


class OneVariant(http.server.BaseHTTPRequestHandler):
    """An index serving cuda12.8-debian and cpu-debian only; cuda12.9 needs a login."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if re.search(r"/(cuda12\.8|cpu)-debian/simple/$", self.path):
            self.send_response(200)
        elif "cuda12.9" in self.path:
            self.send_response(401)
        else:
            self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def demo_images(root: Path, index: str) -> list:
    shipped_project(root)
    matrix = root / "matrix/demo.yaml"
    text = re.sub(r'^wheel_index: .*$', f'wheel_index: "{index}/{{release}}/{{variant}}/simple/"',
                  matrix.read_text(), flags=re.M)
    matrix.write_text(text)
    return expand(load(str(matrix)))


def test_published_and_login_indexes_pass(tmp_path):
    with serving(OneVariant) as origin:
        check_wheel_indexes(demo_images(tmp_path, origin))


def test_an_unpublished_variant_stops_the_run_before_it_builds(tmp_path, cli):
    with serving(OneVariant) as origin:
        images = demo_images(tmp_path, origin)
        matrix = tmp_path / "matrix/demo.yaml"
        matrix.write_text(matrix.read_text().replace(
            "      - {version: 12.9.1, eol: 2027-06-30}\n",
            "      - {version: 13.0.1}\n      - {version: 12.9.1, eol: 2027-06-30}\n"))
        with pytest.raises(CheckFailed) as failed:
            check_wheel_indexes(expand(load(str(matrix))))
        message = str(failed.value)
        assert f"{origin}/1.0/cuda13.0-debian/simple/" in message
        assert "answers 404" in message and "base/cuda-13.0-debian" in message
        assert "matrix/demo-wheels.txt" in message  # an index on this machine: the demo's
        # The command: exit 1 before buildah is asked anything, one line.
        result = cli("--matrix", str(matrix), "matrix", "--render", "--platform",
                     "linux/amd64", "--only", "base/cuda-13.0-debian")
        assert result.code == 1, result
        assert "cuda13.0-debian/simple/" in result.err and "Traceback" not in result.err
        assert images  # the shipped variants were served


def test_an_index_that_does_not_answer_stops_the_run(tmp_path):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(CheckFailed, match="does not answer within .*refused.*tried 2 times"):
        check_wheel_indexes(demo_images(tmp_path, f"http://127.0.0.1:{port}"), timeout=2,
                            retry=Retry(attempts=2, first=0.01, cap=0.01))


def test_the_index_check_is_skipped_deliberately_with_a_warning(tmp_path, cli, monkeypatch):
    """Issue 38.8: a new version is tried before its index exists. The refusal names the
    option; with it the run goes on past the check (here to buildah's version check, made
    to stop it) and warns that the indexes were not checked."""
    from aipcc_build.errors import ToolMissing
    from aipcc_build.imagebuild import matrix_build

    def stop_here(runner: object) -> str:
        raise ToolMissing("buildah-stand-in")

    monkeypatch.setattr(matrix_build.buildah, "check_version", stop_here)
    with serving(OneVariant) as origin:
        demo_images(tmp_path, origin)
        matrix = tmp_path / "matrix/demo.yaml"
        matrix.write_text(matrix.read_text().replace(
            "      - {version: 12.9.1, eol: 2027-06-30}\n",
            "      - {version: 13.0.1}\n      - {version: 12.9.1, eol: 2027-06-30}\n"))
        args = ("--matrix", str(matrix), "matrix", "--render", "--platform", "linux/amd64",
                "--only", "base/cuda-13.0-debian", "--report", str(tmp_path / "r.json"))
        refused = cli(*args)
        assert refused.code == 1 and "(--skip-index-check)" in refused.err, refused.err
        skipped = cli(*args, "--skip-index-check")
    assert "buildah-stand-in is not installed" in skipped.err, skipped.err
    assert "warning: the wheel indexes were not checked" in skipped.err
