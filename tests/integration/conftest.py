"""Fixtures of the demo's integration tests: registry namespaces as the scheduler's tests
use them (the registry, the Debian base and the wheel index come from tests/conftest.py)."""

from scheduler.conftest import namespace  # noqa: F401  (fixture)
