"""SIGTERM and SIGHUP (a CI job out of time, a closed terminal) end validate, promote, mirror
and index alike, mid-work: real skopeo children stalled on a registry that stops answering,
an index source that never answers. Afterwards no child of the run is alive, the temporary
directories it made are gone, and the exit code is 128 + the signal (matrix: see
test_matrix_build's interrupted four-way build). A signal ignored when the command starts
(`nohup`) does not end it."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import command_line, default_signals, descendants
from tests.support.publish import REPO, FlakyProxy

pytestmark = pytest.mark.integration

SIGNALS = [signal.SIGTERM, signal.SIGHUP]


def alive(pid: int, command: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z" and command_line(pid) == command


def interrupt(args: list[str], signum: int, tmp: Path, ready: Callable[[dict[int, str]], bool],
              cwd: Path | None = None) -> tuple[int, str, dict[int, str]]:
    """Run aipcc-build ARGS with TMPDIR=TMP; once READY(its descendants), send SIGNUM. Its exit
    code, stderr and the descendants it had when signalled."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp))
    env.pop("REGISTRY_AUTH_FILE", None)
    proc = subprocess.Popen([sys.executable, "-m", "aipcc_build", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    try:
        deadline = time.monotonic() + 60
        while True:
            children = descendants(proc.pid)
            if ready(children):
                break
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, f"never got mid-work: {children}"
            time.sleep(0.1)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, stderr, children


def assert_left_nothing(code: int, stderr: str, children: dict[int, str], signum: int,
                        tmp: Path) -> None:
    assert code == 128 + signum, stderr
    assert f"stopped by {signal.Signals(signum).name}" in stderr
    assert "Traceback" not in stderr
    deadline = time.monotonic() + 10  # a killed child's parent is gone: init reaps it
    while any(alive(pid, command) for pid, command in children.items()):
        assert time.monotonic() < deadline, [c for p, c in children.items() if alive(p, c)]
        time.sleep(0.1)
    assert sorted(os.listdir(tmp)) == []


def skopeos(children: dict[int, str], verb: str) -> int:
    return sum(command.startswith(f"skopeo {verb}") for command in children.values())


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_validate_promote_and_mirror_stop_their_skopeo_children_and_remove_their_copies(
        release: dict[str, Any], registries: dict[str, Any], tmp_path: Path,
        signum: int) -> None:
    upstream = registries["src"].host
    matrix = ["--matrix", str(release["matrix"])]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # Reads of layers never answer: validate's copy of the image is under way.
    with FlakyProxy(upstream, failures=0, hang_paths=("/blobs/",)) as reads:
        ref = f"docker://{reads.host}/aipcc/base-images/img0:3.0-42"
        assert_left_nothing(*interrupt(
            ["validate", "--no-tls-verify", ref], signum, tmp,
            lambda c: skopeos(c, "copy") == 1 and any(
                n.startswith("aipcc-validate-copy-") for n in os.listdir(tmp))), signum, tmp)
    # Writes never answer: promote's and mirror's copies hang in their uploads, three at once,
    # each waited for by a thread of its own.
    with FlakyProxy(upstream, failures=0, hang=("POST", "PUT", "PATCH")) as writes:
        assert_left_nothing(*interrupt(
            [*matrix, "promote", "--report", str(release["report"]), "--to",
             f"{writes.host}/released", "--no-tls-verify"], signum, tmp,
            lambda c: skopeos(c, "copy") == 3), signum, tmp)
        assert_left_nothing(*interrupt(
            [*matrix, "mirror", "--report", str(release["report"]), "--to",
             f"docker://{writes.host}/mirrored", "--no-tls-verify", "--jobs", "3",
             "--out", str(tmp_path / "out")], signum, tmp,
            lambda c: skopeos(c, "copy") == 3), signum, tmp)
    assert not (tmp_path / "out" / "imagedigestmirrorset.yaml").exists()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts connections and never answers; its origin."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        listener.close()


INDEX_MATRIX = textwrap.dedent("""\
    schema: 1
    product: {name: sigtest, version: "2.1"}
    registry: localhost/aipcc-test-signals
    templates: templates
    wheel_index: "https://idx.example/{release}/{variant}/simple/"
    os:
      debian: {from: localhost/unused:1}
    accelerators:
      cpu: {}
    images:
      app: {template: app.j2, os: [debian]}
    """)


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_index_removes_the_copy_of_a_source_that_never_answers(
        silent_server: str, tmp_path: Path, signum: int) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "app.j2").write_text("FROM {{ os_from }}\n")
    (tmp_path / "matrix.yaml").write_text(INDEX_MATRIX)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    assert_left_nothing(*interrupt(
        ["--matrix", str(tmp_path / "matrix.yaml"), "index", str(tmp_path / "root"),
         f"cpu-debian={silent_server}/simple/"], signum, tmp,
        lambda c: any(n.startswith("aipcc-index-source-") for n in os.listdir(tmp))),
        signum, tmp)
    assert not (tmp_path / "root").exists()


class HeldIndex(http.server.ThreadingHTTPServer):
    """A simple index on 127.0.0.1 of one project with no file, whose root page is answered
    only once RELEASED is set."""

    daemon_threads = True

    def __init__(self) -> None:
        self.released = threading.Event()
        held = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/simple/":
                    held.released.wait(60)
                    body = b'<a href="foo/">foo</a>'
                else:
                    body = b"<html></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_signal_ignored_at_the_start_does_not_end_the_command(tmp_path: Path,
                                                                 signum: int) -> None:
    """`nohup aipcc-build ...` (SIGHUP ignored), a CI runner's background job (SIGINT): the
    installed console script, signalled mid-work, keeps on and finishes. Its handler was
    set over the SIG_IGN it started with, and the signal ended it (128 + the signal)."""
    script = Path(sys.executable).with_name("aipcc-build")
    assert script.is_file(), f"{script}: the console script is not installed"
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "app.j2").write_text("FROM {{ os_from }}\n")
    (tmp_path / "matrix.yaml").write_text(INDEX_MATRIX)
    tmp = tmp_path / "tmp"
    tmp.mkdir()

    def ignoring() -> None:
        default_signals()
        signal.signal(signum, signal.SIG_IGN)

    env = dict(os.environ, TMPDIR=str(tmp))
    with HeldIndex() as server:
        serving = threading.Thread(target=server.serve_forever, daemon=True)
        serving.start()
        try:
            proc = subprocess.Popen(
                [str(script), "--matrix", str(tmp_path / "matrix.yaml"), "index",
                 str(tmp_path / "root"),
                 f"cpu-debian=http://127.0.0.1:{server.server_address[1]}/simple/"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                preexec_fn=ignoring)
            try:
                deadline = time.monotonic() + 60
                while not any(n.startswith("aipcc-index-source-") for n in os.listdir(tmp)):
                    assert proc.poll() is None, proc.communicate()[1]
                    assert time.monotonic() < deadline, "never got mid-work"
                    time.sleep(0.1)
                proc.send_signal(signum)
                time.sleep(0.3)  # a handler, had one been set, has run by now
                server.released.set()
                _, stderr = proc.communicate(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        finally:
            server.released.set()
            server.shutdown()
    assert proc.returncode == 0, stderr
    assert "stopped by" not in stderr
    assert (tmp_path / "root" / "2.1" / "cpu-debian").exists()
    assert sorted(os.listdir(tmp)) == []
