"""A FIFO where a command expects a file a user names (the matrix, a build report, the
requirements of `validate --requirements`, `select --node`'s node object) is an input
error naming the file, exit 2: it was opened and read as a file, so a FIFO with no writer
hung the command for ever (a device such as /dev/zero: read into memory for ever).
`fsutil.read_regular` reads each of them."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

MATRIX = str(REPO / "matrix" / "demo.yaml")


@contextlib.contextmanager
def writer_that_closes(fifo: Path) -> Iterator[None]:
    """A writer that opens FIFO as soon as a reader does, and closes it at once: a command
    that (wrongly) reads the FIFO sees an empty file, not a hang of the test."""
    done = threading.Event()

    def write() -> None:
        while not done.is_set():
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                    return
            done.wait(0.01)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)


@pytest.mark.parametrize("args, option", [
    (["--matrix", "{fifo}", "list"], "cannot read the matrix file"),
    (["--matrix", MATRIX, "promote", "--report", "{fifo}", "--to", "reg.example/x"],
     "--report: cannot read the build report"),
    (["--matrix", MATRIX, "select", "--gpu", "H100", "--driver", "550.54.15", "--report",
      "{fifo}"], "--report: cannot read the build report"),
    (["select", "--node", "{fifo}"], "cannot read node"),
    (["validate", "--requirements", "{fifo}", "--expect", "cpu"],
     "cannot read the requirements"),
])
def test_a_fifo_for_a_file_is_an_input_error_naming_it(cli, tmp_path: Path,
                                                       args: list[str], option: str) -> None:
    fifo = tmp_path / "in.json"
    os.mkfifo(fifo)
    with writer_that_closes(fifo):
        result = cli(*[a.format(fifo=fifo) for a in args])
    assert result.code == 2
    assert result.err == (f"aipcc-build: error: {fifo}: {option}: not a regular file "
                          "(a FIFO)\n")
