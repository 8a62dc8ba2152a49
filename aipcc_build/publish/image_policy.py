"""What travels with a mirrored release to a disconnected site: the signatures and
attestations of each image, and the OpenShift ClusterImagePolicy (config.openshift.io/v1)
that makes the site's nodes require them (with the ImageDigestMirrorSet mirror_config
writes, pulls of the released names go to the mirror and are verified there against the
original names). The one writer of the ClusterImagePolicy."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from ..errors import CheckFailed
from ..fsutil import same_content, write_atomic
from ..tools.retry import Retry, with_retries
from .mirror_config import resource_name

if TYPE_CHECKING:
    from .referrers import Store

IMAGE_POLICY_FILE = "clusterimagepolicy.yaml"


@dataclass(frozen=True)
class Trust:
    """CARRY: copy signatures and attestations with each image (to and from registries
    and OCI layouts).
    POLICY_KEY: the PEM public key the ClusterImagePolicy names (None: none written)."""

    carry: bool = False
    policy_key: Optional[bytes] = None


def trust(carry: bool, key_path: Optional[str]) -> Trust:
    """The Trust of a mirror run; a KEY_PATH that is no P-256 public key is refused
    (InputError naming it) before anything is copied."""
    if key_path is None:
        return Trust(carry)
    from .signing import load_public_key

    return Trust(carry, load_public_key(key_path).pem())


_CARRYING: dict[tuple[str, str], threading.Lock] = {}
_CARRYING_GUARD = threading.Lock()


def _carrying(dest_repository: str, digest: str) -> threading.Lock:
    """One lock per destination repository and digest: two tags of one image mirrored at
    once write the same sigstore attachment and referrers tag, one after the other."""
    with _CARRYING_GUARD:
        return _CARRYING.setdefault((dest_repository, digest), threading.Lock())


@dataclass(frozen=True)
class Place:
    """Where an image and its signatures are: the registry repository HOST/REPO, or, with
    LAYOUT, the repository REPO (the path of its refs) of that OCI layout directory."""

    repository: str
    layout: Optional[Path] = None


def carry_trust(source: Place, dest: Place, digest: str, retry: Retry,
                on_retry: Callable[[int, float, str], None], tls_verify: bool = True,
                authfile: Optional[str] = None) -> int:
    """The signatures and attestations of DIGEST at SOURCE copied to DEST; the number of
    manifests written."""
    from ..tools.oci_registry import RegistryRefused
    from .oci_layout import LayoutStore
    from .release_signing import Registries, carry

    registries = Registries(tls_verify, authfile)

    def store(place: Place) -> tuple[Store, str]:
        if place.layout is not None:
            return LayoutStore(place.layout), place.repository
        return registries.of(place.repository)

    (source_store, source_path), (dest_store, dest_path) = store(source), store(dest)
    try:
        with _carrying(f"{dest.layout or ''}:{dest.repository}", digest):
            written = with_retries(lambda: carry(source_store, source_path, dest_store,
                                                 dest_path, digest), retry, on_retry)
            missing = with_retries(lambda: _not_read_back(
                source_store, source_path, dest_store, dest_path, digest), retry, on_retry)
    except RegistryRefused as exc:
        raise RegistryRefused(f"carrying signatures and attestations: {exc}") from None
    if missing:
        raise CheckFailed(f"{dest.repository}@{digest}: carried, but the destination does "
                          f"not serve {', '.join(missing)}")
    return written


def _not_read_back(source: Store, source_path: str, dest: Store, dest_path: str,
                   digest: str) -> list[str]:
    """What of DIGEST's signatures and referrers at SOURCE the destination does not serve
    after the carry (a registry front that answered 201 to a tag it did not keep): each
    signed manifest's sigstore attachment must hold every signature the source has, its
    referrers (API or tag) list every one the source lists."""
    from .referrers import list_referrers
    from .release_signing import instances, signatures

    top, platforms = instances(source, source_path, digest)
    missing = []
    for subject in ([top] if top not in platforms else []) + platforms:
        wanted, _ = signatures(source, source_path, subject.digest)
        there, _ = signatures(dest, dest_path, subject.digest)
        if any(layer not in there for layer in wanted):
            missing.append(f"the signatures of {subject.digest}")
    for subject in platforms:
        listed = {str(d.get("digest")) for d in list_referrers(dest, dest_path, subject.digest)}
        if any(str(d.get("digest")) not in listed
               for d in list_referrers(source, source_path, subject.digest)):
            missing.append(f"the attestations of {subject.digest}")
    return missing


def policy_text(name: str, key_pem: bytes, scopes: Mapping[str, str]) -> str:
    """The ClusterImagePolicy NAME requiring signatures by KEY_PEM on every released
    repository (the keys of SCOPES: original names, which the IDMS maps to the mirror)."""
    lines = [
        "# Generated by aipcc-build mirror; do not edit.",
        "apiVersion: config.openshift.io/v1",
        "kind: ClusterImagePolicy",
        "metadata:",
        f"  name: {json.dumps(name)}",
        "spec:",
        "  scopes:",
        *[f"  - {json.dumps(scope)}" for scope in sorted(scopes)],
        "  policy:",
        "    rootOfTrust:",
        "      policyType: PublicKey",
        "      publicKey:",
        f"        keyData: {json.dumps(base64.b64encode(key_pem).decode())}",
        "    signedIdentity:",
        "      matchPolicy: MatchRepoDigestOrExact",
    ]
    return "\n".join(lines) + "\n"


def write_image_policy(out: Path, location: str, key_pem: bytes,
                       scopes: Mapping[str, str]) -> Path:
    path = out / IMAGE_POLICY_FILE
    text = policy_text(resource_name(f"aipcc-{location}"), key_pem, scopes)
    if not same_content(path, text):
        write_atomic(path, text)
    return path
