"""The GitLab recipe's promote job (docs/ci/gitlab-ci.yml), its script run as written by
bash against a scripted GitLab API on 127.0.0.1: it fetches every successful child job's
build report (two pages of jobs), and hands the directory to `aipcc-build promote`, here a
stand-in that joins them with the real `merge-reports`. (gitlab-ci-local cannot trigger a
child pipeline, nor serve the API.)"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.support.http_server import serving
from tests.support.project import REPO

TOKEN = "glpat-test-token"


def report(key: str) -> bytes:
    return json.dumps({"schema": 1, "build_id": "7", "registry": "src.io/ns",
                       "images": [{"key": key, "status": "ok", "digest": "sha256:" + "a" * 64,
                                   "reference": f"src.io/ns/{key}:1.0-7"}]}).encode()


# 101 successful jobs of the child pipeline (two pages), one not a build job.
JOBS = [{"id": 1000 + n, "name": f"build:base/img{n}"} for n in range(100)] + \
    [{"id": 2000, "name": "build:runtime/img0"}, {"id": 3000, "name": "lint"}]


class GitLab(http.server.BaseHTTPRequestHandler):
    asked: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        GitLab.asked.append(self.path)
        body: object
        if self.headers.get("PRIVATE-TOKEN") != TOKEN:
            self.send_error(401)
            return
        if url.path == "/api/v4/projects/42/pipelines/5/bridges":
            body = [{"name": "build", "downstream_pipeline": {"id": 6}}]
        elif url.path == "/api/v4/projects/42/pipelines/6/jobs":
            assert query["scope[]"] == ["success"]
            page = int(query.get("page", ["1"])[0])
            body = JOBS[(page - 1) * 100:page * 100]
        elif url.path.startswith("/api/v4/projects/42/jobs/") and url.path.endswith(
                "/artifacts/build-report.json"):
            job = int(url.path.split("/")[6])
            name = next(j["name"] for j in JOBS if j["id"] == job)
            data = report(name[len("build:"):])
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_the_gitlab_promote_job_fetches_every_child_report_and_promotes_them_joined(
        tmp_path: Path) -> None:
    job = yaml.safe_load((REPO / "docs" / "ci" / "gitlab-ci.yml").read_text())["promote"]
    assert job["needs"] == ["build"] and job["stage"] == "release"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "aipcc-build"
    stand_in.write_text(
        "#!/bin/sh\n"
        'echo "$@" > promote-args\n'
        f'PYTHONPATH={REPO} exec {sys.executable} -m aipcc_build merge-reports reports '
        "-o joined.json\n")
    stand_in.chmod(0o755)
    work = tmp_path / "job"
    work.mkdir()
    with serving(GitLab) as origin:
        env = dict(os.environ, PATH=f"{bin_dir}:{Path(sys.executable).parent}:"
                   f"{os.environ['PATH']}", CI_API_V4_URL=f"{origin}/api/v4",
                   CI_PROJECT_ID="42", CI_PIPELINE_ID="5", AIPCC_API_TOKEN=TOKEN,
                   AIPCC_RELEASE_TO="rel.io/release")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(job["script"])],
                              cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (work / "promote-args").read_text().split() == [
        "promote", "--report", "reports", "--to", "rel.io/release", "--manifest",
        "release.json", "--json"]
    joined = json.loads((work / "joined.json").read_text())
    assert len(joined["images"]) == 101  # both pages, the lint job left out
    assert {i["key"] for i in joined["images"]} >= {"base/img0", "base/img99",
                                                   "runtime/img0"}
    assert TOKEN not in done.stdout + done.stderr
