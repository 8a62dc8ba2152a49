"""Issue 22.14: a streamed child printing without newlines holds bounded memory."""

from __future__ import annotations

import subprocess
import sys

from aipcc_build.tools.runner import MAX_LINE, ProcessRunner


def test_output_without_newlines_comes_in_bounded_pieces() -> None:
    child = ProcessRunner().start(["sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' x; "
                                               "printf '\\nlast\\n\\n'; printf 'end'"])
    sizes: list[int] = []
    texts: list[str] = []

    def on_line(text: str) -> None:
        sizes.append(len(text))
        if not text.startswith("x"):
            texts.append(text)

    code, timed_out = child.stream(on_line)
    assert (code, timed_out) == (0, None)
    assert max(sizes) == MAX_LINE
    assert sum(size for size in sizes[:-3]) == 1000000
    assert texts == ["last", "", "end"]


def test_invalid_utf8_is_replaced() -> None:
    lines: list[str] = []
    ProcessRunner().start(["printf", "caf\\351\\n"]).stream(lines.append)
    assert lines == ["caf\ufffd"]


def test_a_huge_line_does_not_grow_the_process() -> None:
    """200 MB without a newline, streamed in a child interpreter: its peak memory stays
    far below the output's size (it held the whole line before)."""
    # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across fork and exec, so
    # the child would report this pytest process's own peak (300 MB late in a full run).
    script = (
        "import re\n"
        "from aipcc_build.tools.runner import ProcessRunner\n"
        "child = ProcessRunner().start(['sh', '-c', "
        "\"head -c 200000000 /dev/zero | tr '\\\\0' x\"])\n"
        "count = [0]\n"
        "child.stream(lambda line: count.__setitem__(0, count[0] + len(line)))\n"
        "status = open('/proc/self/status').read()\n"
        "print(count[0], re.search(r'VmHWM:\\s+(\\d+)', status).group(1))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    total, peak_kib = map(int, done.stdout.split())
    assert total == 200000000
    assert peak_kib < 100 * 1024, peak_kib
