"""Issue 22.5-7: what `index` publishes never changes afterwards, a publish killed at any
point leaves a served index that is whole and a next publish that recovers, and hostile
wheels are refused, one line each, with what is read bounded."""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from aipcc_build.matrix import load
from aipcc_build.wheel_indexes import simple_index
from aipcc_build.wheel_indexes.static_tree import TreeRequest, publish
from tests.support.project import REPO
from tests.support.wheels import make_wheel

DEMO = REPO / "matrix" / "demo.yaml"
VARIANT = "cpu-debian"
SERVED = "1.0/cpu-debian"


def served(root: Path) -> dict[str, tuple[bytes, bytes]]:
    """Every file the index serves: (wheel bytes, metadata bytes) by file name, each checked
    against the hashes its page gives (what pip checks)."""
    simple = root / SERVED / "simple"
    projects, _ = simple_index.read_root_page((simple / "index.html").read_text())
    found = {}
    for project in projects:
        page = simple / project / "index.html"
        for link in simple_index.read_project_page(page.read_text()):
            wheel = (page.parent / link.url).read_bytes()
            metadata = (page.parent / f"{link.url}.metadata").read_bytes()
            assert hashlib.sha256(wheel).hexdigest() == link.sha256, link.filename
            assert hashlib.sha256(metadata).hexdigest() == link.metadata_sha256, link.filename
            found[link.filename] = (wheel, metadata)
    return found


def request(root: Path, *directories: Path) -> TreeRequest:
    return TreeRequest(root=str(root), wheels={VARIANT: tuple(map(str, directories))})


# ---- 22.5: published bytes never change ---------------------------------------------------

def test_rewriting_a_source_wheel_in_place_does_not_change_what_is_served(
        tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w", "lib", "1.0", files={"lib/a.py": b"one"})
    root = tmp_path / "index"
    publish(load(DEMO), request(root, tmp_path / "w"))
    published = served(root)
    original = wheel.read_bytes()
    with open(wheel, "r+b") as handle:  # the same inode, other bytes
        handle.write(b"XXXX")
    assert served(root) == published
    assert published[wheel.name][0] == original


# ---- 22.6: SIGKILL at any point -------------------------------------------------------------

WRITES = ("open", "os.rename", "os.link", "os.symlink", "os.mkdir", "os.remove", "os.rmdir",
          "os.chmod", "shutil.copyfile", "shutil.rmtree")


def _writes(event: str, args: tuple) -> bool:
    if event == "open":
        mode, flags = args[1], args[2]
        return bool(mode and any(c in str(mode) for c in "wax+")) or bool(
            flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
    return event in WRITES


def in_a_child(work: Callable[[], None], setup: Callable[[], None]) -> int:
    """WORK in a forked child after SETUP; the signal that ended it (0: it finished)."""
    pid = os.fork()
    if pid == 0:
        try:
            setup()
            work()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


def kill_at(number: int) -> Callable[[], None]:
    """Kill this process with SIGKILL at its NUMBER-th file-system change."""
    def setup() -> None:
        seen = [0]

        def hook(event: str, args: tuple) -> None:
            if _writes(event, args):
                seen[0] += 1
                if seen[0] == number:
                    os.kill(os.getpid(), signal.SIGKILL)

        sys.addaudithook(hook)
    return setup


def cut_at(size: int) -> Callable[[], None]:
    """Kill this process in the middle of the first write that makes a file exceed SIZE
    bytes (what a SIGKILL mid-write leaves: a truncated file)."""
    def setup() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))
    return setup


def leftovers(root: Path) -> list[str]:
    return [str(Path(d, n).relative_to(root)) for d, dirs, files in os.walk(root)
            for n in dirs + files if ".tmp" in n or ".switch-" in n]


@pytest.fixture
def second_publish(tmp_path: Path) -> Callable[[Callable[[], None]], int]:
    """Publish generation 1 (two wheels); then return a function that runs a second publish
    (one wheel changed, one added) in a child under a setup that may kill it, checks what is
    served after the kill, publishes again and checks that the result is whole."""
    matrix = load(DEMO)
    first = tmp_path / "first"
    make_wheel(first, "keep", "1.0")
    make_wheel(first, "lib", "1.0", files={"lib/a.py": b"one" * 4000})
    root = tmp_path / "index"
    publish(matrix, request(root, first))
    generation_1 = served(root)
    second = tmp_path / "second"
    make_wheel(second, "keep", "1.0")
    make_wheel(second, "lib", "1.0", files={"lib/a.py": b"two" * 4000})
    make_wheel(second, "new", "2.0", requires_python=">=3.9",
               files={"new/data.bin": os.urandom(50000)})

    def wheels(generation: dict[str, tuple[bytes, bytes]]) -> dict[str, bytes]:
        return {name: wheel for name, (wheel, _) in generation.items()}

    generation_2 = {p.name: p.read_bytes() for p in second.iterdir()}

    def run(setup: Callable[[], None]) -> int:
        signal_number = in_a_child(lambda: publish(matrix, request(root, second)), setup)
        # Whole, old or new: never a mix of the two, never a page without its files.
        assert wheels(served(root)) in (wheels(generation_1), generation_2)
        result = publish(matrix, request(root, second))
        assert result.refusals == ()
        assert wheels(served(root)) == generation_2
        assert leftovers(root) == []
        return signal_number

    return run


@pytest.mark.parametrize("number", range(1, 80, 3))
def test_sigkill_at_any_file_system_change_then_a_publish_recovers(
        second_publish: Callable[[Callable[[], None]], int], number: int) -> None:
    second_publish(kill_at(number))


@pytest.mark.parametrize("size", [10, 100, 1000, 5000, 30000])
def test_killed_mid_write_then_a_publish_recovers(
        second_publish: Callable[[Callable[[], None]], int], size: int) -> None:
    assert second_publish(cut_at(size)) == signal.SIGXFSZ


# ---- 22.7: hostile wheels -------------------------------------------------------------------

NAME = "hostile-1.0-py3-none-any.whl"


def fifo(directory: Path) -> None:
    os.mkfifo(directory / NAME)


def to_dev_zero(directory: Path) -> None:
    (directory / NAME).symlink_to("/dev/zero")


def a_directory(directory: Path) -> None:
    (directory / NAME).mkdir()


def dangling(directory: Path) -> None:
    (directory / NAME).symlink_to(directory / "gone.whl")


def huge_metadata(directory: Path) -> None:
    with zipfile.ZipFile(directory / NAME, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("hostile-1.0.dist-info/METADATA", "w", force_zip64=True) as member:
            member.write(b"Metadata-Version: 2.1\nName: hostile\nVersion: 1.0\n\n")
            block = b" " * (1 << 20)
            for _ in range(256):
                member.write(block)
        archive.writestr("hostile-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")


def parent_member(directory: Path) -> None:
    make_wheel(directory, "hostile", "1.0", files={"../../etc/cron.d/evil": b"x"})


def absolute_member(directory: Path) -> None:
    make_wheel(directory, "hostile", "1.0", files={"/etc/cron.d/evil": b"x"})


HOSTILE = {
    "a FIFO": (fifo, "not a regular file"),
    "a symbolic link to /dev/zero": (to_dev_zero, "not a regular file"),
    "a directory": (a_directory, "not a regular file"),
    "a dangling symbolic link": (dangling, "cannot be read"),
    "METADATA inflating to 256 MiB": (huge_metadata, "METADATA"),
    "a ../ member": (parent_member, "outside"),
    "an absolute member": (absolute_member, "outside"),
}


def index_command(root: Path, wheels: Path) -> subprocess.CompletedProcess[str]:
    """In a child with a timeout and a memory bound: a refusal must come quickly."""
    def bound() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    return subprocess.run([sys.executable, "-m", "aipcc_build", "--matrix", str(DEMO), "index",
                           str(root), f"{VARIANT}={wheels}"], capture_output=True, text=True,
                          timeout=60, preexec_fn=bound,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_wheel_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    make, reason = HOSTILE[case]
    wheels = tmp_path / "w"
    make_wheel(wheels, "good", "1.0")
    make(wheels)
    done = index_command(tmp_path / "index", wheels)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    refusals = [line for line in done.stderr.splitlines() if line.startswith("refused: ")]
    assert len(refusals) == 1, done.stderr
    assert refusals[0].startswith(f"refused: {VARIANT}: {wheels / NAME}: ")
    assert reason in refusals[0], refusals[0]
    assert not (tmp_path / "index").exists()


def test_names_that_normalise_alike_are_refused(tmp_path: Path, cli) -> None:
    wheels = tmp_path / "w"
    for name in ("Foo_Bar", "foo_bar", "foo.bar"):
        make_wheel(wheels, name, "1.0")
    done = cli("--matrix", str(DEMO), "index", str(tmp_path / "index"), f"{VARIANT}={wheels}")
    assert done.code == 1, done.err
    refusals = [line for line in done.err.splitlines() if line.startswith("refused: ")]
    assert len(refusals) == 2, done.err
    assert all("the same project, version and tags as Foo_Bar-1.0-py3-none-any.whl" in line
               for line in refusals), refusals
