"""Credentials never reach what a command prints or writes: the one masking function
(`errors.without_credentials`), the CLI's output streams, the build report, the JUnit file
and the build logs; then secrets fed through the error paths of each command that takes a
URL or a reference (issue 30: an index source's user and password were printed whole when
it answered 404)."""

from __future__ import annotations

import http.server
import json
from pathlib import Path

import pytest

from aipcc_build.errors import ToolError, without_credentials
from aipcc_build.imagebuild import build_report
from aipcc_build.imagebuild.build_log import BuildLog
from tests.support.http_server import serving

SECRET = "Pa55-x9q7-SECRET"
REPO = Path(__file__).resolve().parents[2]
DEMO = str(REPO / "matrix" / "demo.yaml")


@pytest.mark.parametrize("text", [
    f"GET https://user:{SECRET}@idx.example/simple/: 404",
    f"GET https://{SECRET}@idx.example/simple/",  # a token as the user
    f"docker://me:{SECRET}@host/ns/x:1",
    f"'me:{SECRET}@host/ns' is not a registry reference",
    f"pulp+https://admin:{SECRET}@pulp.example",
    f"skopeo copy --dest-creds me:{SECRET} a b",
    f"skopeo copy --src-creds=me:{SECRET} a b",
    f"buildah push --registry-token {SECRET} x",
    f"Authorization: Bearer {SECRET}",
    f"https://blobs.example/x?X-Amz-Signature={SECRET}&a=1",
    f"POST /token: grant_type=client_credentials&client_secret={SECRET}",
    f'answered {{"access_token": "{SECRET}", "expires_in": 300}}',
    f'{{"PassWord": "{SECRET}"}}',
    f"AUTHORIZATION: basic {SECRET}",
    # Letters a case-blind pattern matches that lower() does not make: every pattern runs.
    f'{{"pa\u017f\u017fword": "{SECRET}"}}',  # long s
    f"author\u0131zation: Bearer {SECRET}",  # dotless i
    f"author\u0130zation: Bearer {SECRET}",  # dotted capital I
])
def test_every_kind_of_credential_is_masked(text: str) -> None:
    masked = without_credentials(text)
    assert SECRET not in masked and "***" in masked


@pytest.mark.parametrize("text", [
    "needs a user and password: no netrc file at /run/secrets/netrc (NETRC)",
    "a line `machine HOST login USER password TOKEN`",
    "https://idx.example/3.0/cpu/simple/ answered 404",
    "git@github.com:org/repo.git",
    "docker://quay.io/aipcc/base@sha256:0123",
    "pushed base:3.0-42@sha256:0123 and docker://base:1@sha256:4567",
    "skopeo login --password-stdin quay.io",
])
def test_what_holds_no_credential_is_left_alone(text: str) -> None:
    assert without_credentials(text) == text


def test_a_text_without_a_secret_s_literal_compiles_no_pattern() -> None:
    """Issue 37: a JSON report holds colons, but no Authorization header nor a secret's
    field: none of the masks is compiled for it (each cost 1M instructions)."""
    import subprocess
    import sys

    code = ("import re, sys\n"
            "from aipcc_build.errors import without_credentials\n"
            "compiled = []\n"
            "real = re._compile\n"
            "re._compile = lambda p, f: compiled.append(p) or real(p, f)\n"
            "text = '{\"verdict\": \"ok\", \"ref\": \"oci:/srv/a:b\", \"n\": 1}'\n"
            "assert without_credentials(text) == text\n"
            "print(len([p for p in compiled if not isinstance(p, re.Pattern)]))\n")
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, cwd=REPO, timeout=60)
    assert done.stdout.strip() == "0"


def test_tool_errors_logs_and_reports_never_keep_a_password(tmp_path: Path) -> None:
    error = ToolError(["skopeo", "copy", "--dest-creds", f"me:{SECRET}", "a", "b"], 1,
                      f"unauthorized: Authorization: Basic {SECRET}")
    assert SECRET not in str(error) + error.stderr + " ".join(error.command)
    with BuildLog(str(tmp_path / "log")) as log:
        log.write(f"STEP 2/3: RUN pip install --index-url https://u:{SECRET}@idx/simple/ x")
    assert SECRET not in (tmp_path / "log").read_text()
    from aipcc_build.imagebuild.outcomes import RunResult

    result = RunResult(images=(), start=0.0, end=1.0, registry=f"me:{SECRET}@host/ns")
    assert SECRET not in build_report.text(result, "42")


@pytest.fixture
def masked_matrix(tmp_path: Path) -> Path:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "app.j2").write_text("FROM {{ os_from }}\n")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        'schema: 1\nproduct: {name: masked, version: "2.1"}\ntemplates: templates\n'
        "output: out\nregistry: localhost/aipcc-test-masked\n"
        'wheel_index: "https://idx.example/{release}/{variant}/simple/"\n'
        "os:\n  debian: {from: localhost/unused:1}\naccelerators:\n  cpu: {}\n"
        "images:\n  app: {template: app.j2, os: [debian]}\n")
    return matrix


class NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


def test_an_index_source_with_user_and_password_that_answers_404(masked_matrix: Path, cli) -> None:
    with serving(NotFound) as origin:
        for user in (f"user:{SECRET}", SECRET):
            source = origin.replace("http://", f"http://{user}@") + "/simple/"
            for json_flag in ((), ("--json",)):
                done = cli("--matrix", str(masked_matrix), "index", *json_flag,
                           str(masked_matrix.parent / "root"), f"cpu-debian={source}")
                assert done.code != 0
                assert "404" in done.err
                assert SECRET not in done.out + done.err


@pytest.mark.parametrize("args", [
    ("index", f"pulp+https://admin:{SECRET}@127.0.0.1:9", "cpu-debian=wheels"),
    ("promote", "--report", "REPORT", "--registry", f"me:{SECRET}@127.0.0.1:9/ns", "--to",
     "127.0.0.1:9/release", "--no-tls-verify"),
    ("mirror", "--build-id", "1", "--registry", f"me:{SECRET}@127.0.0.1:9/ns", "--to",
     "dir:out"),
    ("--debug", "mirror", "--build-id", "1", "--registry", f"me:{SECRET}@127.0.0.1:9/ns",
     "--to", "dir:out"),  # the traceback too
    ("validate", "--matrix", "MATRIX", "--registry", f"me:{SECRET}@127.0.0.1:9/ns"),
    ("matrix", "--dry-run", "--registry", f"127.0.0.1:9/ns?token={SECRET}"),
    ("matrix", "--dry-run", "--json", "--registry", f"me:{SECRET}@127.0.0.1:9/ns"),
])
def test_no_command_shows_a_password_it_was_given(args: tuple[str, ...], masked_matrix: Path,
                                                  tmp_path: Path, cli) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": 1, "build_id": "42", "images": [
        {"name": "app", "key": "app/cpu-debian", "kind": "app", "status": "ok",
         "reference": "127.0.0.1:9/ns/app:2.1-42", "digest": "sha256:" + "a" * 64}]}))
    done = cli("--matrix", str(masked_matrix),
               *[{"REPORT": str(report), "MATRIX": str(masked_matrix)}.get(a, a) for a in args])
    assert SECRET not in done.out + done.err


def test_a_generated_document_on_stdout_is_printed_verbatim(cli) -> None:
    """Tekton's `docker://${IMAGE%:*}@$DIGEST` looks like user information: a document is
    not a message, and is never rewritten."""
    done = cli("--matrix", str(REPO / "matrix" / "aipcc.yaml"), "plan", "--format", "tekton",
               "--allow-uncommitted")  # this checkout's state is not what is tested
    assert done.code == 0, done.err
    assert '"docker://${IMAGE%:*}@$DIGEST"' in done.out
