"""Names the OCI image spec and Docker's registry API give manifests and annotations: read by
the validator, the local-storage reader, the registry client and the mirror's layout."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Any

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
# A manifest that lists other manifests (one per platform).
INDEX_TYPES = (OCI_INDEX, DOCKER_MANIFEST_LIST)
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
# The tag of an image in an OCI layout's index.json.
REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name"


def load_json(data: bytes | str) -> Any:
    """DATA (a registry's answer, a layout's file) as JSON; ValueError when it is not, JSON
    nested past Python's recursion limit included (`json` raises RecursionError for it,
    a traceback where every caller expects ValueError)."""
    import json

    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None
