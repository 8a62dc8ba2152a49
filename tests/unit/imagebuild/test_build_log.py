"""Issue 22.14: a huge build log keeps its head and its tail, within a cap."""

from __future__ import annotations

from pathlib import Path

from aipcc_build.imagebuild.build_log import BuildLog


def test_a_small_log_is_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "kind" / "name.log"
    with BuildLog(str(path), head=100, tail=100) as log:
        for n in range(5):
            log.write(f"line {n}")
    assert path.read_text() == "".join(f"line {n}\n" for n in range(5))


def test_a_huge_log_keeps_head_and_tail_within_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    with BuildLog(str(path), head=1000, tail=1000) as log:
        for n in range(100000):
            log.write(f"line {n:06d}")  # 12 bytes each
        # The head is on disk while the build runs.
        assert path.read_text().startswith("line 000000\n")
    text = path.read_text()
    assert len(text.encode()) <= 2000 + 100
    lines = text.splitlines()
    assert lines[0] == "line 000000" and lines[-1] == "line 099999"
    marker = next(line for line in lines if line.startswith("[aipcc-build:"))
    kept = len(lines) - 1
    assert marker == f"[aipcc-build: {100000 - kept} lines ({(100000 - kept) * 12} bytes) " \
                     "left out of this log]"
    assert lines[lines.index(marker) - 1] == f"line {lines.index(marker) - 1:06d}"


def test_the_tail_is_written_when_the_build_fails(tmp_path: Path) -> None:
    path = tmp_path / "failed.log"
    try:
        with BuildLog(str(path), head=10, tail=100) as log:
            log.write("first")
            log.write("x" * 50)
            log.write("error: boom")
            raise RuntimeError("the build failed")
    except RuntimeError:
        pass
    assert path.read_text().splitlines()[-1] == "error: boom"


def test_a_step_printing_150_mb_without_a_newline_ends_with_its_log_capped(
        tmp_path: Path) -> None:
    """Issue 38.7: a real child prints 150 MB and no newline; the runner cuts it into
    bounded lines, each masked (linear) and logged: it ends, in bounded memory, and the log
    keeps its head and tail only."""
    import resource

    from aipcc_build.imagebuild.build_log import HEAD_BYTES, TAIL_BYTES
    from aipcc_build.tools.runner import MAX_LINE, ProcessRunner

    size = 150 * 1024 * 1024
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child = ProcessRunner().start(
        ["sh", "-c", f"head -c {size} /dev/zero | tr '\\0' a; printf '\\ndone\\n'"])
    pieces: list[int] = []
    path = tmp_path / "step.log"
    with BuildLog(str(path)) as log:

        def line(text: str) -> None:
            pieces.append(len(text))
            log.write(text)

        code, limit = child.stream(line, timeout=300)
    assert (code, limit) == (0, None)
    assert max(pieces) == MAX_LINE and sum(pieces) == size + len("done")
    assert path.stat().st_size <= HEAD_BYTES + TAIL_BYTES + MAX_LINE + 200
    with path.open("rb") as logged:
        logged.seek(-5, 2)
        assert logged.read() == b"done\n"
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200 * 1024, f"{grown_kib} KiB more held for a 150 MB line"
