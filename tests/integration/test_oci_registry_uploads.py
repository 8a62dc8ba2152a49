"""The registry client's blob uploads against the distro's docker-registry (2.8): a blob
this run sent to one repository goes to another by a cross-repository mount, one request
instead of an upload's two, and is then served there and taken by a manifest naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from aipcc_build.oci import OCI_MANIFEST
from aipcc_build.publish.referrers import EMPTY, canonical, empty_config
from aipcc_build.tools.oci_registry import Registry as Client
from aipcc_build.tools.oci_registry import digest_of
from tests.support.registry import Registry

pytestmark = pytest.mark.integration


def requests(log: Path) -> list[str]:
    """METHOD PATH?QUERY of each request the registry logged."""
    return [line.split('"', 2)[1].split()[0] + " " + line.split('"', 2)[1].split()[1]
            for line in log.read_text().splitlines() if '"' in line]


def test_a_blob_sent_to_one_repository_is_mounted_into_the_next(tmp_path: Path) -> None:
    server = Registry(tmp_path, access_log=tmp_path / "access.log")
    server.start()
    try:
        client = Client(server.host, tls_verify=False)
        client.put_blob("rel/a", EMPTY)
        client.put_blob("rel/a", b"payload")
        before = len(requests(tmp_path / "access.log"))
        client.put_blob("rel/b", EMPTY)
        sent = requests(tmp_path / "access.log")[before:]
        assert sent == [f"POST /v2/rel/b/blobs/uploads/?mount={digest_of(EMPTY)}&from=rel%2Fa"
                        .replace(":", "%3A")]
        assert client.get_blob("rel/b", digest_of(EMPTY)) == EMPTY
        client.put_blob("rel/b", b"payload")  # also there: mounted too
        layer = {"mediaType": "application/octet-stream", "digest": digest_of(b"payload"),
                 "size": 7}
        body = canonical({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                          "config": empty_config(), "layers": [layer]})
        assert client.put_manifest("rel/b", "t", body, OCI_MANIFEST).status == 201
        assert [r.split()[0] for r in requests(tmp_path / "access.log")[before:]
                if "/blobs/" in r] == ["POST", "GET", "POST"]
    finally:
        server.stop()
