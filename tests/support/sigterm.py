"""A pytest plugin: SIGTERM ends the session as Ctrl-C does.

A CI job that runs out of time sends SIGTERM; Python's default action ends the process at
once, and the servers the fixtures started in sessions of their own (Pulp, its PostgreSQL,
registries, nginx) kept running after it. As a KeyboardInterrupt, pytest still tears its
fixtures down, and they stop those servers."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Optional


def _interrupt(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
