"""What the gate proved, as documents that travel with the image: the SBOM (CycloneDX 1.6
JSON) of the toolkit components the validator found, and the verdict as an in-toto
Statement v1 in a DSSE envelope. The one module that writes and reads both."""

from __future__ import annotations

from .. import __version__
from ..errors import excerpt
from ..oci import b64decode, load_json
from ..records import record
from .signing import MAX_SIGNATURES, PublicKey, Signer

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:  # the validator's results: not loaded to verify a release
    from typing import Any, Optional

    from ..validate.results import ImageVerdict

SBOM_MEDIA_TYPE = "application/vnd.cyclonedx+json"
DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
IN_TOTO_PAYLOAD = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
# The predicate type names the document this module writes (version 1 of it).
VERDICT_PREDICATE = "https://aipcc.ai/attestations/toolkit-verdict/v1"
VERDICT_ARTIFACT_TYPE = "application/vnd.aipcc.toolkit-verdict.v1+json"
# The largest verdict envelope read (ours are a few kilobytes: a statement names at most
# 50 problems): a check reads up to verify.MAX_VERDICTS of them at once, and a registry
# could serve the registry client's general bound, 16 MiB, for each.
MAX_VERDICT_ENVELOPE = 1024 * 1024
PREDICATE_ANNOTATION = "in-toto.io/predicate-type"
TOOLKIT_PROPERTY = "aipcc:toolkit"
_URL_SAFE = str.maketrans("-_", "+/")
RELEASE_PROPERTY = "aipcc:toolkit-release"


@record
class Provenance:
    """What the verdict was reached for: the matrix entry and the build."""

    image: str  # the matrix entry (kind/name)
    build_id: str


def sbom(verdict: ImageVerdict, digest: str, name: str) -> bytes:
    """The CycloneDX document of the toolkit components VERDICT's findings name, each with
    its version, evidence (package, path, layer) and the release it belongs to."""
    import json
    import uuid

    components: dict[tuple[str, str, str], dict[str, Any]] = {}
    for finding in verdict.findings:
        if not finding.component or not finding.component_version:
            continue
        key = (finding.toolkit or "", finding.component, finding.component_version)
        component = components.get(key)
        if component is None:
            properties = [{"name": TOOLKIT_PROPERTY, "value": finding.toolkit or "unknown"}]
            if finding.toolkit or finding.version:  # a toolkit's component names its release
                properties.append({"name": RELEASE_PROPERTY,
                                   "value": finding.version or "unknown"})
            component = components[key] = {
                "type": "library", "bom-ref": f"{'/'.join(key)}#{len(components)}",
                "name": finding.component, "version": finding.component_version,
                "properties": properties, "evidence": {"occurrences": []}}
        location = finding.path + (f" (layer {finding.layer_digest})"
                                   if finding.layer_digest else "")
        occurrence: dict[str, Any] = {"location": location}
        if finding.distribution:
            occurrence["additionalContext"] = f"package {finding.distribution}; " \
                                              f"found as {finding.evidence}"
        else:
            occurrence["additionalContext"] = f"found as {finding.evidence}"
        if occurrence not in component["evidence"]["occurrences"]:
            component["evidence"]["occurrences"].append(occurrence)
    document = {
        "bomFormat": "CycloneDX", "specVersion": "1.6",
        "serialNumber": f"urn:uuid:{uuid.uuid4()}", "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "aipcc-build",
                                      "version": __version__}]},
            "component": {"type": "container", "name": name, "version": digest,
                          "bom-ref": digest}},
        "components": list(components.values()),
    }
    return json.dumps(document, indent=1, sort_keys=True).encode()


def statement(verdict: ImageVerdict, digest: str, name: str,
              provenance: Provenance) -> dict[str, Any]:
    """The in-toto Statement of VERDICT about the manifest DIGEST (of the image NAME)."""
    expected = verdict.expected
    findings: dict[str, int] = {}
    for finding in verdict.findings:
        findings[finding.status] = findings.get(finding.status, 0) + 1
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": digest.partition(":")[2]}}],
        "predicateType": VERDICT_PREDICATE,
        "predicate": {
            "verdict": "ok" if verdict.ok else "failed",
            "expected": {"accelerator": expected.accelerator, "release": expected.version,
                         "variant": expected.variant, "source": expected.source}
            if expected is not None else None,
            "toolkits": {family: list(releases)
                         for family, releases in sorted(verdict.toolkits.items())},
            "evidence": {"findings": findings, "layers": verdict.layers,
                         "problems": [f.line() for f in verdict.findings
                                      if f.status not in ("ok", "allowed")][:50]},
            "platform": verdict.platform,
            "matrixEntry": provenance.image,
            "buildId": provenance.build_id,
            "builder": {"name": "aipcc-build", "version": __version__},
        },
    }


def _pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature covers."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def envelope(document: dict[str, Any], signer: Signer) -> bytes:
    """DOCUMENT (an in-toto Statement) in a DSSE envelope signed by SIGNER."""
    import base64
    import json

    payload = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    signature = signer.sign(_pae(IN_TOTO_PAYLOAD, payload))
    return json.dumps({"payloadType": IN_TOTO_PAYLOAD,
                       "payload": base64.b64encode(payload).decode(),
                       "signatures": [{"keyid": "",
                                       "sig": base64.b64encode(signature).decode()}]},
                      indent=1).encode()


def open_envelope(data: bytes, key: PublicKey) -> tuple[Optional[dict[str, Any]], str]:
    """(the Statement, "") when DATA is a DSSE envelope of an in-toto Statement that KEY
    signed; (None, why not) otherwise."""
    try:
        sealed = load_json(data)
        payload = _base64(sealed["payload"])
        listed = list(sealed["signatures"])
        payload_type = sealed["payloadType"]
    except (ValueError, KeyError, TypeError):
        return None, "not a DSSE envelope"
    signatures = []
    for entry in listed[:MAX_SIGNATURES]:
        try:  # one signature unreadable: the others may be the key's
            signatures.append(_base64(entry["sig"]))
        except (ValueError, KeyError, TypeError):
            continue
    if payload_type != IN_TOTO_PAYLOAD:
        return None, f"its payload is {excerpt(payload_type)}, not an in-toto Statement"
    if not isinstance(payload_type, str):
        return None, "not a DSSE envelope"
    if not any(key.verifies(_pae(payload_type, payload), s) for s in signatures):
        return None, "its DSSE signature is not by the key"
    try:
        document = load_json(payload)
    except ValueError:
        return None, "its payload is not JSON"
    if not isinstance(document, dict) or document.get("_type") != STATEMENT_TYPE:
        return None, "its payload is not an in-toto Statement v1"
    return document, ""


def _base64(text: object) -> bytes:
    """DSSE's base64 (its spec, and Go's decoders that sigstore's tools use): the standard
    or the URL-safe alphabet, padded or not, its lines wrapped or not; ValueError for
    anything else, TypeError for no string."""
    if not isinstance(text, str):
        raise TypeError("not a string")
    compact = text.replace("\r", "").replace("\n", "").translate(_URL_SAFE)
    return b64decode(compact + "=" * (-len(compact) % 4))


def subject_digests(document: dict[str, Any]) -> list[str]:
    """The sha256 digests a Statement's subjects name."""
    found = []
    subjects = document.get("subject")
    for subject in subjects if isinstance(subjects, list) else []:
        digests = subject.get("digest") if isinstance(subject, dict) else None
        value = digests.get("sha256") if isinstance(digests, dict) else None
        if isinstance(value, str):
            found.append(f"sha256:{value}")
    return found


def check_sbom(data: bytes) -> str:
    """Why DATA is not the SBOM `sbom` writes ("" when it is one): a CycloneDX 1.5 or 1.6
    JSON document whose every toolkit component (one with a toolkit property) has its
    version, its evidence (where it was found) and the toolkit release it belongs to.
    What verification reads of it, checked field by field: the tests hold `sbom`'s
    documents to CycloneDX's JSON schema, which is too slow to load for every check."""
    try:
        document = load_json(data)
    except ValueError:
        return "the SBOM is not JSON"
    if not isinstance(document, dict) or document.get("bomFormat") != "CycloneDX" \
            or document.get("specVersion") not in ("1.5", "1.6") \
            or not isinstance(document.get("components", []), list):
        return "the SBOM is not a CycloneDX 1.5 or 1.6 document"
    for component in document.get("components", []):
        if not isinstance(component, dict):
            return "the SBOM lists a component that is not an object"
        listed = component.get("properties")
        properties = {p.get("name"): p.get("value") for p in
                      (listed if isinstance(listed, list) else []) if isinstance(p, dict)}
        toolkit = properties.get(TOOLKIT_PROPERTY)
        if toolkit in (None, "unknown"):
            continue
        what = f"the SBOM's {excerpt(toolkit)} component {excerpt(component.get('name'))}"
        evidence = component.get("evidence")
        occurrences = evidence.get("occurrences") if isinstance(evidence, dict) else None
        if not _text(component.get("version")):
            return f"{what} has no version"
        if not isinstance(occurrences, list) or not occurrences or not all(
                isinstance(o, dict) and _text(o.get("location")) for o in occurrences):
            return f"{what} has no evidence of where it was found"
        if not _text(properties.get(RELEASE_PROPERTY)):
            return f"{what} names no toolkit release ({RELEASE_PROPERTY})"
    return ""


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())
