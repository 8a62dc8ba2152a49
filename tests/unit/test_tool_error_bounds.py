"""A ToolError echoes each line of a program's stderr bounded (MAX_ECHOED_LINE): a tool
printing one 10 MB line made a 10 MB message. Masking comes before the cut, so a cut never
leaves a secret without what names it."""

from __future__ import annotations

from aipcc_build.errors import MAX_ECHOED_LINE, STDERR_TAIL_LINES, ToolError

BIG = "x" * (10 * 1024 * 1024)


def test_a_10_mb_line_is_echoed_bounded() -> None:
    error = ToolError(["skopeo", "copy"], 1, f"first\n{BIG}\n{BIG}")
    assert len(str(error)) < 3 * MAX_ECHOED_LINE
    assert str(error).startswith("skopeo exited 1: first\nxxx")
    assert len(error.stderr) <= STDERR_TAIL_LINES * (MAX_ECHOED_LINE + 4)


def test_a_registry_failure_on_a_long_line_is_said_bounded() -> None:
    error = ToolError(["skopeo", "copy"], 1,
                      f"dial tcp registry example.com:5000/ connection refused {BIG}")
    assert "nothing answers at example.com:5000" in str(error)
    assert len(str(error)) < 2 * MAX_ECHOED_LINE


def test_a_credential_is_masked_before_the_cut() -> None:
    secret = "s3cret-" + "y" * 2 * MAX_ECHOED_LINE
    error = ToolError(["buildah", "push"], 1, f"GET https://me:{secret}@host/v2/ failed")
    assert "s3cret" not in str(error) and "yyy" not in error.stderr
