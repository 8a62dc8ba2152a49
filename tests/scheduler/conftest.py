"""The foundation's small on-disk project and in-process CLI, for the `context` tests."""

from foundation.conftest import cli, project  # noqa: F401  (fixtures)
