"""Reads of shared container storage while other processes add and remove containers and
images (a CI runner's other jobs on the same storage; issue 30: `buildah containers` failed
with "container not known" under a GitLab job). A churner makes and removes working
containers and images in a loop, bounded in time, while the product lists the working
containers (the build's leftovers check, `clean`) and validates an image read in place
from the same storage: none of it fails, and nothing of the churner's is touched."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid

import pytest

from aipcc_build.imagebuild.matrix_build import clean
from aipcc_build.tools import buildah
from aipcc_build.tools.runner import ProcessRunner
from aipcc_build.validate import Target, validate_targets

pytestmark = pytest.mark.integration

CHURN_SECONDS = 5.0


def churn(base: str, until: float, done: list[str], failed: list[str]) -> None:
    """Working containers and images made and removed in a loop until UNTIL; each round's
    name in DONE, what failed in FAILED."""
    tag = uuid.uuid4().hex[:8]
    number = 0
    while time.monotonic() < until:
        name = f"localhost/aipcc-test-churn/{tag}:{number}"
        number += 1
        steps = [["buildah", "from", "--pull-never", "--name", f"churn-{tag}-{number}", base],
                 ["buildah", "commit", "--quiet", f"churn-{tag}-{number}", name],
                 ["buildah", "rm", f"churn-{tag}-{number}"],
                 ["buildah", "rmi", name]]
        for step in steps:
            ran = subprocess.run(step, capture_output=True, text=True, timeout=120)
            if ran.returncode != 0:
                failed.append(f"{' '.join(step)}: {ran.stderr.strip()}")
                break
        else:
            done.append(name)


def test_listing_and_reading_storage_while_another_process_churns_it(
        unique_base: tuple[str, str]) -> None:
    base = unique_base[0]
    until = time.monotonic() + CHURN_SECONDS
    done: list[str] = []
    failed: list[str] = []
    # One churner: two race each other inside buildah itself (a commit of one loses the
    # identical layer the other's rmi removes: "layer not known"), which says nothing of
    # the product.
    churners = [threading.Thread(target=churn, args=(base, until, done, failed))]
    for churner in churners:
        churner.start()
    listings = validations = 0
    try:
        runner = ProcessRunner()
        while any(churner.is_alive() for churner in churners):
            buildah.containers(runner)
            cleaned = clean(runner)
            assert cleaned.removed == ()  # the churner's containers are no run's
            outcome, = validate_targets([Target(f"containers-storage:{base}")])
            assert outcome.exit_code != 2, outcome.error
            listings += 1
            validations += 1
    finally:
        for churner in churners:
            churner.join()
    assert failed == []
    assert len(done) >= 2 and listings >= 2 and validations >= 2
