"""The scan's findings do not depend on the members `Unpacker.walk` places without showing
them: on random layers, the scan gives the same `LayerScan` (evidence and hazards with
their paths, refusals and their messages, what the final-tree model keeps, the member
count) as a scan shown every member the reader's and `Unpacker.add`'s full code yield."""

from __future__ import annotations

import gzip
import hashlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aipcc_build.imagefs.blobs import BlobLocation, LayerJob
from aipcc_build.imagefs.overlay import Unpacker
from aipcc_build.imagefs.tar import TarEntry, TarWalker
from aipcc_build.validate.layers import scan_layer
from aipcc_build.validate.results import LayerScan
from tests.support.random_layers import layers


def _every_member(self: Unpacker, walker: TarWalker, shown: Callable[[str], object],
                  odd: int) -> Iterator[tuple[TarEntry, str, Optional[str]]]:
    """`walk` without its fast case: every member read and placed by the full code."""
    for entry in walker:
        name = entry.name.decode("utf-8", "surrogateescape")
        yield entry, name, self.add(entry, name)


def _scan(data: bytes, compress: bool) -> LayerScan:
    blob = gzip.compress(data, mtime=0) if compress else data
    with tempfile.TemporaryDirectory(prefix="aipcc-test-scan-walk-") as tmp:
        digest = hashlib.sha256(blob).hexdigest()
        (Path(tmp) / digest).write_bytes(blob)
        return scan_layer(LayerJob(f"sha256:{digest}", "", BlobLocation(f"{tmp}/{digest}")))


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=layers(), compress=st.booleans())
def test_the_scan_finds_the_same_with_and_without_the_fast_case(
        monkeypatch: pytest.MonkeyPatch, data: bytes, compress: bool) -> None:
    fast = _scan(data, compress)
    with monkeypatch.context() as patched:
        patched.setattr(Unpacker, "walk", _every_member)
        full = _scan(data, compress)
    assert fast == full
