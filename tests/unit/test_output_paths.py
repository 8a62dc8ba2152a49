"""Issue 22.9 and 22.12: every output goes through the one safe writer (fsutil), which never
replaces what is not a regular file; every file-system error on a path option ends in one
line naming the path and exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aipcc_build import fsutil
from tests.support.filesystems import device_node, full_tmpfs, tmpfs
from tests.support.project import REPO

DEMO = str(REPO / "matrix" / "demo.yaml")
LONG = "x" * 300  # longer than any file system's name limit (255)


# ---- 22.9: the writer ---------------------------------------------------------------------

def test_a_device_node_is_written_into_never_replaced(tmp_path: Path) -> None:
    node = device_node(tmp_path)
    before = os.stat(node)
    fsutil.write_atomic(node, "a report\n")
    after = os.stat(node)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino
    assert os.listdir(tmp_path) == ["null"]  # no temporary left beside it


def test_a_fifo_receives_the_bytes_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    fsutil.write_atomic(fifo, b"through the pipe")
    reader.join(10)
    assert received == [b"through the pipe"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_dev_stdout_piped_ends_in_the_pipe(tmp_path: Path) -> None:
    done = subprocess.run(f"'{sys.executable}' -m aipcc_build --matrix '{DEMO}' compat "
                          "--format json -o /dev/stdout | cat", shell=True, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(done.stdout)["schema"] == 1


def test_dev_stdout_to_a_file_keeps_the_file_and_what_came_before(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    code = ("import sys; from aipcc_build import fsutil; print('before', flush=True); "
            "fsutil.write_atomic('/dev/stdout', 'written\\n'); print('after')")
    with open(out, "w") as handle:
        inode = os.fstat(handle.fileno()).st_ino
        subprocess.run([sys.executable, "-c", code], stdout=handle, check=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.read_text() == "before\nwritten\nafter\n"
    assert os.stat(out).st_ino == inode


def test_a_directory_is_refused_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError) as caught:
        fsutil.write_atomic(tmp_path, "x")
    assert caught.value.filename == str(tmp_path)


def test_compat_into_a_device_node(tmp_path: Path, cli) -> None:
    node = device_node(tmp_path)
    done = cli("--matrix", DEMO, "compat", "--format", "json", "-o", str(node))
    assert done.code == 0, done.err
    assert stat.S_ISCHR(os.stat(node).st_mode)


# ---- 22.12: one line and exit 2 for every path option --------------------------------------

def one_line(done, path: object) -> None:  # type: ignore[no-untyped-def]
    assert done.code == 2, (done.code, done.err)
    assert "Traceback" not in done.err
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aipcc-build: error: "), done.err
    assert str(path) in lines[0], done.err


def full_or_read_only(command: str, done, path: object) -> None:  # type: ignore[no-untyped-def]
    """A destination that cannot take what is written: one line naming the path (exit 2);
    for `index`, whose destination it is, every variant not switched (issue 38: exit 1, its
    line on stdout, one line on stderr naming the path)."""
    if command != "index ROOT":
        one_line(done, path)
        return
    assert done.code == 1, (done.code, done.err)
    assert "Traceback" not in done.err
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and ": not switched" in lines[0] and str(path) in lines[0], \
        done.err
    assert "\tnot-switched\t" in done.out


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """An OCI layout `mirror` wrote, holding no image: enough to reach every path option."""
    found = tmp_path / "layout"
    found.mkdir()
    (found / "index.json").write_text('{"schemaVersion": 2, "manifests": []}')
    (found / "aipcc-mirror.json").write_text('{"schema": 1, "source_registry": "r.io/ns"}')
    (tmp_path / "job-report.json").write_text(json.dumps(
        {"schema": 1, "build_id": "42", "registry": "127.0.0.1:9/ns",
         "product": {"name": "aipcc", "version": "3.0", "moving_tags": []},
         "images": [{"key": "base/a", "name": "a", "kind": "base",
                     "reference": "127.0.0.1:9/ns/a:1", "status": "ok",
                     "digest": "sha256:" + "a" * 64}]}))
    return found


def path_commands(layout: Path) -> dict[str, object]:
    """Each command's path option, as a function of the path to give it."""
    return {
        "compat -o": lambda p: ("--matrix", DEMO, "compat", "--format", "json", "-o", p),
        "mirror --out": lambda p: ("--matrix", DEMO, "mirror", "--from", f"dir:{layout}",
                                   "--to", "docker://127.0.0.1:9/ns", "--out", p),
        "mirror --to dir:": lambda p: ("--matrix", DEMO, "mirror", "--from", f"dir:{layout}",
                                       "--to", f"dir:{p}"),
        "mirror --to oci-archive:": lambda p: ("--matrix", DEMO, "mirror", "--from",
                                               f"dir:{layout}", "--to", f"oci-archive:{p}"),
        "mirror --from dir:": lambda p: ("--matrix", DEMO, "mirror", "--from", f"dir:{p}",
                                         "--to", f"dir:{layout}.out"),
        "mirror --from oci-archive:": lambda p: ("--matrix", DEMO, "mirror", "--from",
                                                 f"oci-archive:{p}", "--to",
                                                 f"dir:{layout}.out"),
        "index ROOT": lambda p: ("--matrix", DEMO, "index", p,
                                 f"cuda12.8-debian={layout.parent / 'wheels'}"),
        "matrix --report": lambda p: ("--matrix", DEMO, "matrix", "--report", p),
        "matrix --junit": lambda p: ("--matrix", DEMO, "matrix", "--junit", p),
        "merge-reports -o": lambda p: ("merge-reports", str(layout.parent / "job-report.json"),
                                       "-o", p),
        "promote --manifest": lambda p: ("promote", "--report",
                                         str(layout.parent / "job-report.json"), "--to",
                                         "127.0.0.1:9/release", "--manifest", p),
    }


COMMANDS = list(path_commands(Path("/")))


@pytest.fixture
def commands(layout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    from aipcc_build.imagebuild import matrix_build

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("a build started")

    monkeypatch.setattr(matrix_build, "build_matrix", no_build)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    from tests.support.wheels import make_wheel

    make_wheel(wheels, "packaging", "24.2")
    return path_commands(layout)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_name_too_long(commands: dict, tmp_path: Path, cli, command: str) -> None:
    path = tmp_path / LONG / "out"
    one_line(cli(*commands[command](str(path))), tmp_path / LONG)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_where_a_directory_is_wanted(commands: dict, tmp_path: Path, cli,
                                            command: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    one_line(cli(*commands[command](str(blocker / "out"))), blocker)


@pytest.mark.integration  # mounts a tmpfs
@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.startswith("mirror --from")])
def test_a_read_only_file_system(commands: dict, tmp_path: Path, cli, command: str) -> None:
    with tmpfs(tmp_path / "ro", read_only=True) as mount:
        full_or_read_only(command, cli(*commands[command](str(mount / "out"))), mount / "out")


@pytest.mark.integration  # mounts a tmpfs
@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.startswith(
    ("mirror --from", "matrix"))])
def test_a_full_file_system(commands: dict, tmp_path: Path, cli, command: str) -> None:
    with full_tmpfs(tmp_path / "full") as mount:
        full_or_read_only(command, cli(*commands[command](str(mount / "out"))),
                          mount / "out")
        files = [name for _, _, names in os.walk(mount) for name in names]
        assert files == ["filler"]  # nothing half-written left


@pytest.mark.parametrize("command", COMMANDS)
def test_a_dangling_symbolic_link(commands: dict, tmp_path: Path, cli, command: str) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "missing" / "target")
    done = cli(*commands[command](str(link / "out")))
    one_line(done, link)


def test_mirror_to_dir_naming_a_file_and_oci_archive_naming_a_directory(
        layout: Path, tmp_path: Path, cli) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    one_line(cli("--matrix", DEMO, "mirror", "--from", f"dir:{layout}", "--to",
                 f"dir:{a_file}"), a_file)
    assert a_file.read_text() == "mine"
    one_line(cli("--matrix", DEMO, "mirror", "--from", f"dir:{layout}", "--to",
                 f"oci-archive:{tmp_path}"), tmp_path)


def test_a_dangling_symbolic_link_as_index_root(commands: dict, tmp_path: Path, cli) -> None:
    root = tmp_path / "root"
    root.symlink_to(tmp_path / "gone")
    done = cli(*commands["index ROOT"](str(root)))
    one_line(done, root)
    assert "missing" in done.err


# ---- 22.16: mirror --from leaves no temporary directory on a refusal -----------------------

@pytest.mark.parametrize("content", ["not a tar", "a layout of another tool"])
def test_mirror_from_a_refused_archive_leaves_no_temporary_directory(
        tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch, content: str) -> None:
    import tarfile
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    archive = tmp_path / "in.tar"
    if content == "not a tar":
        archive.write_bytes(b"\0" * 1000 + b"garbage")
    else:
        index = tmp_path / "index.json"
        index.write_text('{"schemaVersion": 2, "manifests": []}')
        with tarfile.open(archive, "w") as tar:
            tar.add(index, arcname="index.json")
    done = cli("--matrix", DEMO, "mirror", "--from", f"oci-archive:{archive}", "--to",
               f"dir:{tmp_path / 'out'}")
    one_line(done, archive)
    assert list(scratch.iterdir()) == []


# ---- 22.13: a full file system for the report loses neither the summary nor the digests ----

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.integration  # mounts a tmpfs
@pytest.mark.parametrize("option", ["--report", "--junit"])
def test_a_full_disk_for_the_report_keeps_the_summary_and_the_digests(
        tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch, option: str) -> None:
    from aipcc_build.imagebuild import matrix_build
    from aipcc_build.imagebuild.outcomes import ImageResult, RunResult, Status
    from aipcc_build.matrix import expand, load

    image = expand(load(DEMO))[0]

    def built(request: matrix_build.MatrixBuild, *args: object, **kwargs: object
              ) -> RunResult:  # the builds skipped; the report written as build_matrix does
        return matrix_build.reported(RunResult(images=(ImageResult(
            image=image, status=Status.OK, log="", digest=DIGEST, start=1.0,
            end=2.0),), start=0.0, end=3.0), request)

    monkeypatch.setattr(matrix_build, "build_matrix", built)
    with full_tmpfs(tmp_path / "full") as mount:
        target = mount / "out"
        paths = {"--report": str(target), "--junit": str(tmp_path / "r.json")}
        args = ["--report", paths["--report"]]
        if option == "--junit":
            args = ["--report", str(tmp_path / "r.json"), "--junit", str(target)]
        done = cli("--matrix", DEMO, "matrix", "--push", *args)
        assert done.code == 2, done.err
        assert "Traceback" not in done.err
        assert image.reference in done.out and DIGEST in done.out  # the summary
        assert f"{target}: No space left on device" in done.err.splitlines()[-1]
        if option == "--report":
            assert json.loads(done.err[done.err.index("{"):done.err.rindex("}") + 1])[
                "images"][0]["digest"] == DIGEST
        else:
            assert json.loads((tmp_path / "r.json").read_text())["images"][0]["digest"] == \
                DIGEST


# ---- issue 37: the temporary file, made without loading tempfile ----------------------------

def test_the_temporary_file_is_new_private_and_gone_after_the_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.json"
    taken = tmp_path / f".out.json.{os.getpid()}.{'00' * 6}.tmp"
    taken.write_text("another writer's")  # its name comes up first: never opened (its
    # writer, of this pid, is alive: the temporary is not stale)
    draws = iter([b"\0" * 6, b"\1" * 6])
    monkeypatch.setattr(fsutil.os, "urandom", lambda size: next(draws))
    made: list[int] = []
    real_open = os.open

    def spied(path: str, flags: int, mode: int = 0o777) -> int:
        made.append(mode)
        return real_open(path, flags, mode)

    monkeypatch.setattr(fsutil.os, "open", spied)
    fsutil.write_atomic(target, "{}")
    assert target.read_text() == "{}" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert made == [0o600, 0o600]  # private until renamed over TARGET
    assert taken.read_text() == "another writer's"
    assert sorted(p.name for p in tmp_path.iterdir()) == [taken.name, "out.json"]


def test_a_write_loads_no_tempfile(tmp_path: Path) -> None:
    code = ("import sys\n"
            "from aipcc_build.fsutil import write_atomic\n"
            f"write_atomic({str(tmp_path / 'x')!r}, 'x')\n"
            "print('tempfile' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, cwd=REPO, timeout=60)
    assert done.stdout.strip() == "False"


# ---- a write counts once it is read back ----------------------------------------------------

def test_bytes_lost_below_the_writer_fail_the_write_and_keep_the_old_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "manifest.json"
    target.write_text("the old manifest\n")
    real_write = os.write

    def dropping(fd: int, data: bytes) -> int:  # a file system that loses the last byte
        real_write(fd, bytes(data)[:-1])
        return len(data)

    monkeypatch.setattr(fsutil.os, "write", dropping)
    with pytest.raises(OSError) as raised:
        fsutil.write_atomic(target, "the new manifest\n")
    monkeypatch.undo()
    assert raised.value.filename == str(target)
    assert "read back 16 bytes that differ from the 17 written" in str(raised.value.strerror)
    assert target.read_text() == "the old manifest\n"
    assert os.listdir(tmp_path) == ["manifest.json"]


def test_a_file_put_in_place_of_the_written_one_fails_the_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.json"
    real_replace = os.replace

    def raced(source: str, destination: Path) -> None:
        real_replace(source, destination)
        (tmp_path / "other").write_text("someone else's")
        real_replace(tmp_path / "other", destination)

    monkeypatch.setattr(fsutil.os, "replace", raced)
    with pytest.raises(OSError, match="replaced by another file") as raised:
        fsutil.write_atomic(target, "{}")
    assert raised.value.filename == str(target)


def test_what_is_written_is_read_back_once(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    body = os.urandom(3 << 20)
    read: list[int] = []
    real_pread = os.pread

    def counted(fd: int, size: int, offset: int) -> bytes:
        block = real_pread(fd, size, offset)
        read.append(len(block))
        return block

    monkeypatch.setattr(fsutil.os, "pread", counted)
    fsutil.write_atomic(tmp_path / "big", [body[:1000], body[1000:]])
    assert sum(read) == len(body)  # every byte read back exactly once, nothing more
    assert (tmp_path / "big").read_bytes() == body


# ---- SIGKILL in the middle of a write -------------------------------------------------------

WRITER = """
import sys, time
from aipcc_build import fsutil
with fsutil.output(sys.argv[1]) as handle:
    handle.write(b"x" * int(sys.argv[2]))
    handle.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def _writing(target: Path, size: int = 10) -> subprocess.Popen[str]:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(size)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    return writer


def _temporaries(where: Path) -> list[str]:
    return sorted(name for name in os.listdir(where) if name.endswith(".tmp"))


def test_a_temporary_left_by_a_killed_writer_goes_with_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "build-report.json"
    writer = _writing(target)
    left = _temporaries(tmp_path)
    assert left == [f".build-report.json.{writer.pid}.{left[0].split('.')[-2]}.tmp"]
    writer.kill()
    writer.wait(10)
    assert _temporaries(tmp_path) == left  # SIGKILL: nothing ran to remove it
    fsutil.write_atomic(target, "{}")
    assert target.read_text() == "{}"
    assert os.listdir(tmp_path) == ["build-report.json"]


@pytest.mark.integration  # mounts a tmpfs
def test_a_killed_writers_temporary_no_longer_fills_the_disk(tmp_path: Path) -> None:
    """On a small disk, what a writer killed mid-write left would make every later write of
    the output fail for want of space: the next write removes it first."""
    with tmpfs(tmp_path / "small", "256k") as mount:
        target = mount / "archive.tar"
        writer = _writing(target, 160 << 10)
        writer.kill()
        writer.wait(10)
        assert len(_temporaries(mount)) == 1
        fsutil.write_atomic(target, b"y" * (160 << 10))
        assert target.read_bytes() == b"y" * (160 << 10)
        assert os.listdir(mount) == ["archive.tar"]


def test_a_live_writers_temporary_is_left_to_it(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    writer = _writing(target)
    try:
        left = _temporaries(tmp_path)
        fsutil.write_atomic(target, "{}")
        assert _temporaries(tmp_path) == left and len(left) == 1
    finally:
        writer.kill()
        writer.wait(10)


def test_only_regular_files_of_our_naming_are_removed(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=60)
    dead = int(gone.stdout)
    kept = {
        f".out.json.{dead}.{'ab' * 6}.tmp": "dir",  # a directory of our naming
        f".out.json.{dead}.{'cd' * 6}.tmp": "link",  # a link to a file elsewhere
        f".out.json.{dead}.tmp": "file",  # another naming
        f".out.json.{dead}.{'AB' * 6}.tmp": "file",
    }
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("kept")
    for name, kind in kept.items():
        if kind == "dir":
            (tmp_path / name).mkdir()
        elif kind == "link":
            (tmp_path / name).symlink_to(elsewhere)
        else:
            (tmp_path / name).write_text("kept")
    stale = tmp_path / f".out.json.{dead}.{'01' * 6}.tmp"
    stale.write_text("half")
    another = tmp_path / f".report.json.{dead}.{'ef' * 6}.tmp"  # another output's, stale
    another.write_text("half")
    fsutil.write_atomic(tmp_path / "out.json", "{}")
    assert not stale.exists() and not another.exists()
    assert sorted(_temporaries(tmp_path)) == sorted(kept)
    assert elsewhere.read_text() == "kept"


@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.startswith(
    ("mirror --from", "matrix", "promote"))])  # builds; promote writes after its registry work
def test_every_output_is_read_back(commands: dict, tmp_path: Path, cli, command: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system that loses bytes without an error, under every command's output file:
    the write fails naming the path, and no half-written output is left."""
    real_write = os.write

    def dropping(fd: int, data: bytes) -> int:
        if not os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            return real_write(fd, data)
        real_write(fd, bytes(data)[1:])
        return len(data)

    monkeypatch.setattr(fsutil.os, "write", dropping)
    out = tmp_path / "dest" / "out"
    out.parent.mkdir()
    done = cli(*commands[command](str(out)))
    monkeypatch.undo()
    full_or_read_only(command, done, out)
    assert not [n for _, _, names in os.walk(out.parent) for n in names if n.endswith(".tmp")]


def test_a_directory_is_listed_for_stale_temporaries_once_per_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index generation writes thousands of files into one directory: listing it
    before each write would cost more than the writes (bench/output_readback.py)."""
    listed: list[str] = []
    real_listdir = os.listdir

    def spied(where: str) -> list[str]:
        listed.append(where)
        return real_listdir(where)

    monkeypatch.setattr(fsutil.os, "listdir", spied)
    for name in ("a", "b", "c"):
        fsutil.write_atomic(tmp_path / name, name)
    assert listed == [str(tmp_path)]
