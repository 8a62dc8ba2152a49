"""Every default of a build run, once: `imagebuild.schedule_options.ScheduleOptions` takes its field
defaults from here, `aipcc-build matrix` shows them, and the CI jobs `plan` emits keep the
files a run writes and give a build the time a run allows. Plain values, so that the CLI
reads them while it starts without building a dataclass; below every stage, so that `plan`
and `imagebuild` share them without one importing the other."""

from __future__ import annotations

import os

LOG_DIR = "logs"  # one log per image: DIR/kind/name.log
REPORT_FILE = "build-report.json"  # the run's report (imagebuild.build_report)
RETRIES = 1  # of a transient build failure or a push
RETRY_DELAY = 2.0  # seconds before the first retry; doubles after each
MAX_RETRY_DELAY = 60.0  # ... up to this
BUILD_TIMEOUT = 4 * 3600.0  # seconds for one image's `buildah build`
PUSH_TIMEOUT = 600.0  # seconds for one push attempt
PUSH_STALL = 60.0  # seconds one push attempt may send and receive nothing


def jobs() -> int:
    """Builds at most at once: the host's CPUs, at most 4."""
    return min(os.cpu_count() or 1, 4)
