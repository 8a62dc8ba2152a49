"""Listing shared container storage while other processes change it (a CI runner's other
jobs): buildah's "container not known" from a listing that lost the race is listed again;
any other failure is not (the real churner: tests/integration/test_storage_churn.py)."""

from __future__ import annotations

import pytest

from aipcc_build.errors import ToolError
from aipcc_build.tools import buildah
from aipcc_build.tools.retry import Retry, StillFailing
from tests.support.fakes import RecordingRunner

RACE = b"Error: reading build containers: container not known\n"


def test_a_listing_that_raced_with_a_removal_is_listed_again() -> None:
    answers = iter([(125, b"", RACE), (125, b"", RACE), (0, b'[{"id": "c1"}]', b"")])
    runner = RecordingRunner(lambda argv: next(answers))
    assert buildah.containers(runner) == {"c1"}
    assert len(runner.calls) == 3


def test_a_race_that_never_ends_and_other_failures_are_errors(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buildah, "LISTING_RETRY", Retry(attempts=3, first=0.0, cap=0.0))
    with pytest.raises(StillFailing):
        buildah.containers(RecordingRunner(lambda argv: (125, b"", RACE)))
    broken = RecordingRunner(lambda argv: (125, b"", b"Error: permission denied\n"))
    with pytest.raises(ToolError, match="permission denied"):
        buildah.containers(broken)
    assert len(broken.calls) == 1
