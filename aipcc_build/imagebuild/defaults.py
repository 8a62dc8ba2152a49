"""Every default of a build run, once: `options.ScheduleOptions` takes its field defaults
from here and `aipcc-build matrix` shows them. Plain values, so that the CLI reads them
while it starts without building a dataclass."""

from __future__ import annotations

import os

LOG_DIR = "logs"  # one log per image: DIR/kind/name.log
RETRIES = 1  # of a transient build failure or a push
RETRY_DELAY = 2.0  # seconds before the first retry; doubles after each
MAX_RETRY_DELAY = 60.0  # ... up to this
BUILD_TIMEOUT = 4 * 3600.0  # seconds for one image's `buildah build`
PUSH_TIMEOUT = 600.0  # seconds for one push attempt
PUSH_STALL = 60.0  # seconds one push attempt may send and receive nothing


def jobs() -> int:
    """Builds at most at once: the host's CPUs, at most 4."""
    return min(os.cpu_count() or 1, 4)
