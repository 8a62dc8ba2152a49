"""verify against the distro's docker-registry holding what a lying writer put there: a
referrers tag listing ten thousand verdict attestations (the registry stores the 2 MB
index as it stores any), every one a request or two: verify read them all. Real
registry, real skopeo for the image (a layout mirror writes), the real command line;
no image is built (seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aipcc_build.oci import OCI_INDEX
from aipcc_build.publish import attestations
from aipcc_build.publish.referrers import canonical, referrers_tag
from aipcc_build.publish.release_signing import Registries
from tests.integration.test_mirror_trust_hostile import PATH, TAG, run_mirror, signed_layout
from tests.support.publish import FlakyProxy
from tests.support.registry import Registry

pytestmark = pytest.mark.integration


def test_ten_thousand_listed_verdicts_cost_a_bounded_number_of_requests(
        registry: Registry, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    digest = signed_layout(src, tmp_path)
    assert run_mirror(cli, src, registry.host, tmp_path / "out").code == 0
    client, path = Registries(tls_verify=False).of(f"{registry.host}/site/{PATH}")
    # The registry refuses an index naming manifests it does not hold: the one artifact
    # there (no verdict) listed ten thousand times as one.
    found = client.get_manifest(path, referrers_tag(digest))
    assert found is not None
    artifact = json.loads(found[0])["manifests"][0]
    listed = [dict(artifact, artifactType=attestations.VERDICT_ARTIFACT_TYPE)] * 10000
    client.put_manifest(path, referrers_tag(digest),
                        canonical({"schemaVersion": 2, "mediaType": OCI_INDEX,
                                   "manifests": listed}), OCI_INDEX)
    with FlakyProxy(registry.host, failures=0) as front:
        done = cli("verify", "--key", str(tmp_path / "k.pub"), "--no-tls-verify",
                   f"{front.host}/site/{PATH}:{TAG}", "--json")
    assert done.code == 1, done.err
    assert "Traceback" not in done.err
    report = json.loads(done.out)
    problems = [p for image in report["images"] for p in image["problems"]]
    assert any("attestation" in p for p in problems), problems
    assert len(front.requests) < 100, len(front.requests)
