"""Signed and attested releases against real programs: keys made by Debian 13's skopeo
1.18, images in the distro's docker-registry (no referrers API: the tag-schema fallback),
`skopeo copy` under a `sigstoreSigned` policy in a Debian 13 container judging what
promote signed, and `verify` with each way a release can be wrong."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aipcc_build.publish import attestations
from aipcc_build.publish.referrers import Subject, push_artifact
from aipcc_build.publish.release_signing import (
    Registries,
    Released,
    sign,
    sign_release,
)
from aipcc_build.publish.signing import Signer, load_public_key, load_signer
from aipcc_build.publish.verify import VerifyRequest, verify
from aipcc_build.validate.results import Expectation, Finding, ImageVerdict
from tests.support.publish import FlakyProxy, build_image, digest_at, make_registry, push, run_cli
from tests.support.registry import Registry
from tests.support.sigstore import VerifyingSkopeo, sigstore_skopeo_image

pytestmark = pytest.mark.integration

PASSPHRASE = "correct horse " + uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
def skopeo118(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VerifyingSkopeo]:
    work = tmp_path_factory.mktemp("sigstore-skopeo")
    tool = VerifyingSkopeo(sigstore_skopeo_image(), work)
    (work / "pass").write_text(PASSPHRASE + "\n")
    for prefix in ("ours", "other"):
        done = tool.run("generate-sigstore-key", "--output-prefix", f"/w/{prefix}",
                        "--passphrase-file", "/w/pass")
        assert done.returncode == 0, done.stderr
    (work / "key.pub").write_bytes((work / "ours.pub").read_bytes())
    try:
        yield tool
    finally:
        tool.remove()


@pytest.fixture(scope="module")
def ours(skopeo118: VerifyingSkopeo) -> Signer:
    return load_signer(str(skopeo118.work / "ours.private"), str(skopeo118.work / "pass"))


@pytest.fixture(scope="module")
def other(skopeo118: VerifyingSkopeo) -> Signer:
    return load_signer(str(skopeo118.work / "other.private"), str(skopeo118.work / "pass"))


def ok_validator(ref: str) -> list[ImageVerdict]:
    return [ImageVerdict(ref=ref, platform="linux/amd64", expected=Expectation("cpu"),
                         findings=(Finding("ok", "package", "/usr/lib/x", "found",
                                           toolkit="cuda", version="12.8",
                                           component="cudart",
                                           component_version="12.8.90",
                                           layer_digest="sha256:" + "1" * 64),))]


def failed_validator(ref: str) -> list[ImageVerdict]:
    return [ImageVerdict(ref=ref, platform="linux/amd64", expected=Expectation("cuda", "12.8"),
                         findings=(Finding("violation", "package", "/usr/lib/y",
                                           "CUDA 12.9 in a cuda 12.8 image", toolkit="cuda",
                                           version="12.9"),))]


@pytest.fixture
def pushed(registry: Registry, base_image: str) -> Iterator[Any]:
    """push(name) -> (HOST/REPO:TAG, digest) of a fresh small image in REGISTRY."""
    names: list[str] = []

    def make(name: str, tag: str = "1.0") -> tuple[str, str]:
        local = f"localhost/aipcc-test-signing/{name}-{uuid.uuid4().hex[:8]}"
        build_image(base_image, local, local)
        names.append(local)
        ref = f"{registry.host}/rel/{name}:{tag}"
        return ref, push(local, ref)

    yield make
    subprocess.run(["buildah", "rmi", "-f", *names], capture_output=True)


def release(ref: str, digest: str, signer: Signer, validator: Any = ok_validator) -> None:
    repository = ref.rsplit(":", 1)[0]
    sign_release([Released("base/x", f"{repository}@{digest}", digest, (ref,))], signer,
                 "42", validator, Registries(tls_verify=False))


def check(ref: str, skopeo118: VerifyingSkopeo) -> tuple[str, ...]:
    result = verify(VerifyRequest(refs=(ref,), key=str(skopeo118.work / "ours.pub"),
                                  tls_verify=False))
    return result.images[0].problems


def test_promote_signs_what_skopeo_lets_through_and_verify_passes(
        release: dict[str, Any], registries: dict[str, Registry], authfile: Path,
        skopeo118: VerifyingSkopeo) -> None:
    work = skopeo118.work
    dst = registries["dst"].host
    args = ["--matrix", str(release["matrix"]), "promote", "--report",
            str(release["report"]), "--to", f"{dst}/aipcc",
            "--no-tls-verify", "--authfile", str(authfile),
            "--sign-by-sigstore-private-key", str(work / "ours.private"),
            "--sign-passphrase-file", str(work / "pass")]
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    assert "attestation(s) written" in done.stderr
    refs = [f"{dst}/aipcc/base-images/img{n}:3.0-42" for n in range(3)]
    verified = run_cli("verify", "--key", str(work / "ours.pub"), "--no-tls-verify",
                       "--authfile", str(authfile), *refs, "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert all(image["ok"] for image in json.loads(verified.stdout)["images"])
    # The real containers/image accepts the signature of every tag, with the policy.
    (work / "auth.json").write_bytes(authfile.read_bytes())
    skopeo118.policy(dst)
    for ref in (refs[0], f"{dst}/aipcc/base-images/img1:latest"):
        pulled = skopeo118.pull(ref, "--src-authfile", "/w/auth.json")
        assert pulled.returncode == 0, pulled.stderr
    # A rerun writes nothing more.
    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    assert "0 signature(s) and 0 attestation(s) written" in again.stderr


def test_a_bad_key_stops_promote_before_any_copy(
        release: dict[str, Any], registries: dict[str, Registry], authfile: Path,
        skopeo118: VerifyingSkopeo, tmp_path: Path) -> None:
    dst = registries["dst"].host
    for key_file, passphrase, expected in (
            ("ours.private", "wrong passphrase\n", "does not decrypt"),
            ("missing.private", PASSPHRASE + "\n", "cannot read the private key"),
            ("ours.pub", PASSPHRASE + "\n", "not a sigstore private key")):
        (tmp_path / "pass").write_text(passphrase)
        done = run_cli("--matrix", str(release["matrix"]), "promote", "--report",
                       str(release["report"]), "--to", f"{dst}/aipcc",
                       "--no-tls-verify", "--authfile", str(authfile),
                       "--sign-by-sigstore-private-key", str(skopeo118.work / key_file),
                       "--sign-passphrase-file", str(tmp_path / "pass"))
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and expected in done.stderr
        assert PASSPHRASE not in done.stderr
        assert digest_at(f"{dst}/aipcc/base-images/img0:3.0-42", authfile) is None


def test_verify_refuses_each_wrong_release(pushed: Any, ours: Signer, other: Signer,
                                          skopeo118: VerifyingSkopeo,
                                          registry: Registry) -> None:
    skopeo118.policy(registry.host)
    good, good_digest = pushed("good")
    release(good, good_digest, ours)
    assert check(good, skopeo118) == ()
    assert check(f"{good.rsplit(':', 1)[0]}@{good_digest}", skopeo118) == ()
    assert skopeo118.pull(good).returncode == 0

    unsigned, _ = pushed("unsigned")
    assert any("is not signed" in p for p in check(unsigned, skopeo118))
    assert skopeo118.pull(unsigned).returncode != 0

    foreign, foreign_digest = pushed("foreign")
    release(foreign, foreign_digest, other)
    assert any("not by the key" in p for p in check(foreign, skopeo118))
    assert skopeo118.pull(foreign).returncode != 0

    # The release's tag pushed again with another image after the release.
    repushed, repushed_digest = pushed("repushed")
    release(repushed, repushed_digest, ours)
    again, again_digest = pushed("repushed")
    assert again == repushed and again_digest != repushed_digest
    assert any("is not signed" in p for p in check(repushed, skopeo118))
    assert skopeo118.pull(repushed).returncode != 0

    # Signed, never attested.
    bare, bare_digest = pushed("bare")
    registries = Registries(tls_verify=False)
    client, path = registries.of(bare.rsplit(":", 1)[0])
    sign(client, path, bare_digest, (bare,), ours)
    problems = check(bare, skopeo118)
    assert any("no SBOM attestation" in p for p in problems)
    assert any("no verdict attestation" in p for p in problems)
    assert skopeo118.pull(bare).returncode == 0  # the signature alone is good

    failed, failed_digest = pushed("failed")
    release(failed, failed_digest, ours, failed_validator)
    assert any("says failed" in p for p in check(failed, skopeo118))

    # A verdict about another digest hung off this one (with its own SBOM and signature).
    elsewhere, elsewhere_digest = pushed("elsewhere")
    client, path = registries.of(elsewhere.rsplit(":", 1)[0])
    sign(client, path, elsewhere_digest, (elsewhere,), ours)
    body, media_type = client.get_manifest(path, elsewhere_digest) or (b"", "")
    subject = Subject(path, elsewhere_digest, media_type, len(body))
    verdict = ok_validator(elsewhere)[0]
    push_artifact(client, subject, attestations.SBOM_MEDIA_TYPE,
                  attestations.SBOM_MEDIA_TYPE,
                  attestations.sbom(verdict, elsewhere_digest, elsewhere), {})
    document = attestations.statement(verdict, good_digest, good,
                                      attestations.Provenance("base/x", "42"))
    push_artifact(client, subject, attestations.VERDICT_ARTIFACT_TYPE,
                  attestations.DSSE_MEDIA_TYPE, attestations.envelope(document, ours))
    assert any(f"subject is {good_digest}, not {elsewhere_digest}" in p
               for p in check(elsewhere, skopeo118))


def test_skopeo_signatures_verify_here(pushed: Any, skopeo118: VerifyingSkopeo,
                                       registry: Registry) -> None:
    """A signature skopeo 1.18 wrote is read and verified by `verify` (which then only
    misses the attestations skopeo does not write)."""
    skopeo118.policy(registry.host)
    ref, digest = pushed("by-skopeo")
    signed = ref.rsplit(":", 1)[0] + ":signed"
    done = skopeo118.run("--registries.d", "/w/registries.d", "copy", "--src-tls-verify=false",
                         "--dest-tls-verify=false", "--sign-by-sigstore-private-key",
                         "/w/ours.private", "--sign-passphrase-file", "/w/pass",
                         f"docker://{ref}", f"docker://{signed}")
    assert done.returncode == 0, done.stderr
    problems = check(signed, skopeo118)
    assert problems and all("attestation" in p for p in problems), problems


def test_mirror_carries_signatures_and_the_site_verifies_them(
        pushed: Any, ours: Signer, skopeo118: VerifyingSkopeo, registry: Registry,
        tmp_path: Path) -> None:
    ref, digest = pushed("mirrored", "3.0-42")
    release(ref, digest, ours)
    # What promote writes of the release it signed (--key is refused for a build report:
    # its images were never signed).
    report = tmp_path / "release.json"
    report.write_text(json.dumps({"schema": 1, "build_id": "42", "dry_run": False,
                                  "images": [{"key": "base/mirrored", "reference": ref,
                                              "digest": digest,
                                              "pull": f"{ref.rsplit(':', 1)[0]}@{digest}",
                                              "platforms": []}]}))
    site = make_registry(tmp_path / "site")
    try:
        out = tmp_path / "out"
        out.mkdir()
        args = ["mirror", "--report", str(report), "--to", f"docker://{site.host}/site",
                "--no-tls-verify", "--key", str(skopeo118.work / "ours.pub"),
                "--out", str(out)]
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        policy = yaml.safe_load((out / "clusterimagepolicy.yaml").read_text())
        assert policy["spec"]["scopes"] == [f"{registry.host}/rel/mirrored"]
        assert_valid_cluster_image_policy(policy)
        again = run_cli(*args)  # a rerun: nothing more to copy
        assert again.returncode == 0 and "1 already there" in again.stderr, again.stderr
        registry.stop()
        pull_at_the_site(skopeo118, registry, site, out, "rel/mirrored", digest)
    finally:
        site.stop()


def pull_at_the_site(skopeo118: VerifyingSkopeo, registry: Registry, site: Registry,
                     out: Path, path: str, digest: str) -> None:
    """The release REGISTRY gone: the site pulls the released name PATH@DIGEST from its
    mirror (the registries.conf mirror wrote into OUT) and the signatures found there pass
    the policy of the release; verify's checks of the attestations pass at the mirror (only
    the identity differs: the signatures name the released repository)."""
    work = skopeo118.work
    skopeo118.policy(registry.host)
    (work / "registries.d" / "site.yaml").write_text(
        f"docker:\n  {site.host}:\n    use-sigstore-attachments: true\n")
    mirror = f'location = "{site.host}/'
    (work / "registries.conf").write_text("\n".join(  # the test registries speak plain HTTP
        line + ("\ninsecure = true" if line.strip().startswith(mirror) else "")
        for line in (out / "registries.conf").read_text().splitlines()) + "\n")
    subprocess.run(["rm", "-rf", str(work / "out-mirror")], check=True)
    pulled = skopeo118.run("--registries-conf", "/w/registries.conf", "--policy",
                           "/w/policy.json", "--registries.d", "/w/registries.d", "copy",
                           f"docker://{registry.host}/{path}@{digest}", "dir:/w/out-mirror")
    assert pulled.returncode == 0, pulled.stderr
    problems = check(f"{site.host}/site/{path}:3.0-42", skopeo118)
    assert problems and all("was signed as" in p for p in problems), problems


def test_an_archive_carries_signatures_and_attestations_to_the_site(
        pushed: Any, ours: Signer, skopeo118: VerifyingSkopeo, registry: Registry,
        tmp_path: Path) -> None:
    """mirror into an oci-archive (skopeo writes no signature into a layout): the sigstore
    attachments and the referrers travel in it under the referrers tag schema; mirror
    --from the archive into the site's registry pushes them there, and the site pulls the
    released name through its mirror under the release's sigstoreSigned policy. An archive
    that also holds an image never signed is refused with --key, before any copy."""
    from aipcc_build.oci import REF_NAME_ANNOTATION
    from aipcc_build.publish import oci_layout

    ref, digest = pushed("carried", "3.0-42")
    release(ref, digest, ours)
    unsigned, unsigned_digest = pushed("unsigned", "3.0-42")
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({"schema": 1, "build_id": "42", "registry": registry.host,
                                  "images": [{"key": f"base/{name}", "name": name,
                                              "kind": "base", "reference": at,
                                              "status": "ok", "digest": at_digest}
                                             for name, at, at_digest in (
                                                 ("carried", ref, digest),
                                                 ("unsigned", unsigned, unsigned_digest))]}))
    archive = tmp_path / "release.tar"
    done = run_cli("mirror", "--report", str(report), "--to", f"oci-archive:{archive}",
                   "--no-tls-verify")
    assert done.returncode == 0, done.stderr
    assert oci_layout.archive_refs(archive) == {"rel/carried:3.0-42": digest,
                                               "rel/unsigned:3.0-42": unsigned_digest}
    site = make_registry(tmp_path / "site")
    try:
        registry.stop()  # the site sees the archive only
        out = tmp_path / "out"
        args = ["--to", f"docker://{site.host}/site", "--no-tls-verify", "--key",
                str(skopeo118.work / "ours.pub"), "--out", str(out)]
        # The unsigned image would be refused at the site by the policy --key writes: the
        # archive is refused before anything is copied, naming it.
        refused = run_cli("mirror", "--from", f"oci-archive:{archive}", *args)
        assert refused.returncode == 2, refused.stderr
        assert "rel/unsigned:3.0-42" in refused.stderr and "--key" in refused.stderr
        assert "rel/carried" not in refused.stderr and not out.exists()
        # The release's signed image alone, from the same layout (dir:) the archive held.
        signed = tmp_path / "signed"
        signed.mkdir()
        oci_layout.unpack(archive, signed)
        index = json.loads((signed / "index.json").read_text())
        index["manifests"] = [m for m in index["manifests"] if m["annotations"][
            REF_NAME_ANNOTATION] != "rel/unsigned:3.0-42"]
        (signed / "index.json").write_text(json.dumps(index))
        out.mkdir()
        loaded = run_cli("mirror", "--from", f"dir:{signed}", *args)
        assert loaded.returncode == 0, loaded.stderr
        assert "1 copied, 0 already there" in loaded.stderr, loaded.stderr
        assert_valid_cluster_image_policy(
            yaml.safe_load((out / "clusterimagepolicy.yaml").read_text()))
        pull_at_the_site(skopeo118, registry, site, out, "rel/carried", digest)
        again = run_cli("mirror", "--from", f"dir:{signed}", *args)  # nothing more to do
        assert again.returncode == 0 and "1 already there" in again.stderr, again.stderr
    finally:
        site.stop()


CRD = Path(__file__).resolve().parents[1] / "data" / "openshift" / \
    "0000_10_config-operator_01_clusterimagepolicies.crd.yaml"


def assert_valid_cluster_image_policy(document: dict[str, Any]) -> None:
    """DOCUMENT against OpenShift's CRD: its OpenAPI schema, and the CEL rules of the fields
    it sets (string(bytes) decodes a `format: byte` field, as the API server does)."""
    import base64

    import jsonschema

    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema = version["schema"]["openAPIV3Schema"]
    assert document["apiVersion"] == f"{crd['spec']['group']}/v1"
    assert document["kind"] == crd["spec"]["names"]["kind"]
    jsonschema.validate(document, schema)
    root = schema["properties"]["spec"]["properties"]["policy"]["properties"]["rootOfTrust"]
    key_rules = root["properties"]["publicKey"]["properties"]["keyData"][
        "x-kubernetes-validations"]
    pem = base64.b64decode(document["spec"]["policy"]["rootOfTrust"]["publicKey"]["keyData"])
    celpy = pytest.importorskip("celpy")
    environment = celpy.Environment()
    for rule in key_rules:
        program = environment.program(environment.compile(rule["rule"]))
        assert program.evaluate({"self": celpy.celtypes.BytesType(pem)}), rule["message"]
    for rule in root["x-kubernetes-validations"]:
        program = environment.program(environment.compile(rule["rule"]))
        value = celpy.json_to_cel(document["spec"]["policy"]["rootOfTrust"])
        assert program.evaluate({"self": value}), rule["message"]


def push_index(pushed: Any, target: str) -> tuple[str, list[str]]:
    """An index of two small images (amd64 and arm64 by their labels) pushed to TARGET:
    (its digest, its platform manifests' digests, amd64 first)."""
    ref, _ = pushed("amd")
    other_ref, _ = pushed("arm")
    index = f"localhost/aipcc-test-signing/index-{uuid.uuid4().hex[:8]}"
    subprocess.run(["buildah", "manifest", "create", index], check=True, capture_output=True)
    try:
        for source, arch in ((ref, "amd64"), (other_ref, "arm64")):
            subprocess.run(["buildah", "manifest", "add", "--tls-verify=false", "--arch", arch,
                            index, f"docker://{source}"], check=True, capture_output=True)
        subprocess.run(["buildah", "manifest", "push", "--all", "--tls-verify=false", index,
                        f"docker://{target}"], check=True, capture_output=True)
    finally:
        subprocess.run(["buildah", "manifest", "rm", index], capture_output=True)
    digest = digest_at(target)
    assert digest is not None
    client, path = Registries(tls_verify=False).of(target.rsplit(":", 1)[0])
    return digest, [m["digest"] for m in json.loads(
        (client.get_manifest(path, digest) or (b"{}", ""))[0])["manifests"]]


def test_promote_attests_each_platform_of_an_index_with_the_verdict_recorded_for_it(
        pushed: Any, skopeo118: VerifyingSkopeo, registry: Registry, tmp_path: Path) -> None:
    """A build report of a two-platform image (each platform's entry: its instance digest,
    the list's digest, its verdict): promote signs the index and each platform, attests
    each platform with its own recorded verdict, verify and skopeo --multi-arch all pass."""
    from dataclasses import replace

    from aipcc_build.imagebuild.build_report import verdict_record
    from aipcc_build.publish.referrers import list_referrers, read_artifact

    source = f"{registry.host}/build/multi:3.0-42"
    digest, instances = push_index(pushed, source)
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({
        "schema": 1, "build_id": "42", "registry": f"{registry.host}/build",
        "product": {"name": "aipcc", "version": "3.0", "moving_tags": []},
        "images": [{"key": "base/multi", "name": "multi", "kind": "base",
                    "reference": source, "platform": platform, "status": "ok",
                    "digest": instance, "list_digest": digest,
                    "verdict": verdict_record(replace(ok_validator("x")[0],
                                                      platform=platform))}
                   for platform, instance in zip(("linux/amd64", "linux/arm64"),
                                                 instances)]}))
    work = skopeo118.work
    done = run_cli("promote", "--report", str(report), "--to", f"{registry.host}/out",
                   "--no-tls-verify", "--sign-by-sigstore-private-key",
                   str(work / "ours.private"), "--sign-passphrase-file", str(work / "pass"))
    assert done.returncode == 0, done.stderr
    released = f"{registry.host}/out/multi:3.0-42"
    assert digest_at(released) == digest
    verified = run_cli("verify", "--key", str(work / "ours.pub"), "--no-tls-verify", released)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    skopeo118.policy(registry.host)
    pulled = skopeo118.pull(released, "--multi-arch", "all")
    assert pulled.returncode == 0, pulled.stderr
    client, path = Registries(tls_verify=False).of(f"{registry.host}/out/multi")
    for platform, instance in zip(("linux/amd64", "linux/arm64"), instances):
        [found] = list_referrers(client, path, instance, attestations.VERDICT_ARTIFACT_TYPE)
        artifact = read_artifact(client, path, str(found["digest"]))
        assert artifact is not None
        document, _ = attestations.open_envelope(artifact[1], load_public_key(
            str(work / "ours.pub")))
        assert document is not None
        assert attestations.subject_digests(document) == [instance]
        assert document["predicate"]["platform"] == platform


def test_an_index_and_each_platform_are_signed_and_attested(
        pushed: Any, ours: Signer, skopeo118: VerifyingSkopeo, registry: Registry,
        base_image: str) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    from aipcc_build.publish.referrers import list_referrers, read_artifact

    target = f"{registry.host}/rel/multi:3.0-42"
    digest, platform_digests = push_index(pushed, target)

    def two_platforms(ref: str) -> list[ImageVerdict]:
        return [ImageVerdict(ref=ref, platform="linux/amd64", digest=instance,
                             expected=Expectation("cpu"))
                for instance in platform_digests]

    registries = Registries(tls_verify=False)
    client, path = registries.of(f"{registry.host}/rel/multi")
    sign_release([Released("base/multi", f"{registry.host}/rel/multi@{digest}", digest,
                           (target,))], ours, "42", two_platforms, registries)
    assert check(target, skopeo118) == ()
    skopeo118.policy(registry.host)
    pulled = skopeo118.pull(target, "--multi-arch", "all")
    assert pulled.returncode == 0, pulled.stderr
    for instance in platform_digests:
        sbom = list_referrers(client, path, instance, attestations.SBOM_MEDIA_TYPE)
        found = read_artifact(client, path, sbom[0]["digest"])
        assert found is not None
        assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(found[1].decode()) is None


def signed_promote(release: dict[str, Any], work: Path, manifest: Path) -> list[str]:
    """The arguments of a signed promote of RELEASE writing MANIFEST (`--to` to add)."""
    return ["--matrix", str(release["matrix"]), "promote", "--report",
            str(release["report"]), "--no-tls-verify", "--manifest", str(manifest),
            "--sign-by-sigstore-private-key", str(work / "ours.private"),
            "--sign-passphrase-file", str(work / "pass")]


def test_a_registry_refusing_a_signature_or_attestation_fails_promote_naming_the_image(
        release: dict[str, Any], registries: dict[str, Registry],
        skopeo118: VerifyingSkopeo) -> None:
    """The copies are made; the signature (or the attestation) is refused: exit 1 naming
    the image, the release said to be incomplete (no release manifest), verify names what
    is missing; a rerun through the registry itself completes it."""
    work = skopeo118.work
    src = registries["src"].host
    manifest = work / "release-manifest.json"
    args = signed_promote(release, work, manifest)
    for namespace, refused, missing in (
            ("signature", ".sig", "is not signed"),  # the sigstore attachment
            ("attestation", "/manifests/sha256:", "no verdict attestation")):  # by digest
        with FlakyProxy(src, failures=-1, status=403, methods=("PUT",),
                        path=refused) as refusing:
            done = run_cli(*args, "--to", f"{refusing.host}/{namespace}")
        assert done.returncode == 1, done.stderr
        assert "base/img" in done.stderr and "not completely signed" in done.stderr
        assert "status 403" in done.stderr and not manifest.exists()
        released = f"{src}/{namespace}/base-images/img0:3.0-42"
        assert digest_at(released) == release["entries"][0]["digest"]
        assert any(missing in p for p in check(released, skopeo118)), namespace
        completed = run_cli(*args, "--to", f"{src}/{namespace}")
        assert completed.returncode == 0, completed.stderr
        assert check(released, skopeo118) == ()
        assert released in manifest.read_text()
        manifest.unlink()


def test_promote_signs_only_what_the_destination_reads_back(
        release: dict[str, Any], registries: dict[str, Registry],
        skopeo118: VerifyingSkopeo) -> None:
    """A front that keeps no tag (a manifest written under a tag is stored under its digest
    only, the write answered 201): the copies are made, the read-back finds each tag
    serving nothing, and nothing is signed or attested: a signature binds what the
    destination serves, not what promote believes it copied. Exit 1 naming the tag."""
    work = skopeo118.work
    with FlakyProxy(registries["src"].host, failures=0, digest_only=True) as front:
        done = run_cli("--matrix", str(release["matrix"]), "promote", "--report",
                       str(release["report"]), "--to", f"{front.host}/lost",
                       "--no-tls-verify", "--sign-by-sigstore-private-key",
                       str(work / "ours.private"), "--sign-passphrase-file",
                       str(work / "pass"))
    assert done.returncode == 1, done.stderr
    assert f"{front.host}/lost/base-images/img0:3.0-42 serves nothing" in done.stderr
    assert any(method == "PUT" and "/manifests/" in path for method, path in front.requests)
    # Nothing written there: what the signing would read first (the attachments, the
    # referrers) is only read while the image copies.
    assert [(m, p) for m, p in front.requests if m != "GET" and (
        ".sig" in p or "/referrers/" in p or "/manifests/sha256-" in p)] == []


# An SBOM's manifest, as the signing writes it (canonical JSON).
SBOM_MANIFEST = f'"artifactType":"{attestations.SBOM_MEDIA_TYPE}"'.encode()


@pytest.mark.parametrize(("front", "said", "written", "missing"), [
    ({"lose": (".sig",)}, ".sig: the registry accepted its write of sha256:", ".sig",
     "is not signed"),
    ({"drop": (SBOM_MANIFEST,)}, "the registry stored the write as nothing",
     "/manifests/sha256:", "no SBOM")], ids=["signature-tag", "sbom-by-digest"])
def test_a_write_the_registry_does_not_keep_leaves_the_release_incomplete(
        release: dict[str, Any], registries: dict[str, Registry],
        skopeo118: VerifyingSkopeo, front: dict[str, Any], said: str, written: str,
        missing: str) -> None:
    """A front that answers 201 to the write of each `sha256-<hex>.sig` tag but keeps it
    under its digest only, or to the write of each SBOM's manifest by its digest (with the
    registry's Docker-Content-Digest) but keeps nothing: the signing reads each back,
    finds nothing, and promote exits 1 naming the image and the write, no release
    manifest written; a rerun through the registry itself completes the release."""
    work = skopeo118.work
    src = registries["src"].host
    manifest = work / "release-manifest.json"
    manifest.unlink(missing_ok=True)  # the session's work directory: another test's
    args = signed_promote(release, work, manifest)
    namespace = f"unkept-{uuid.uuid4().hex[:6]}"
    with FlakyProxy(src, failures=0, **front) as proxy:
        done = run_cli(*args, "--to", f"{proxy.host}/{namespace}")
    assert done.returncode == 1, done.stderr
    assert "base/img" in done.stderr and "not completely signed" in done.stderr
    assert said in done.stderr and not manifest.exists()
    assert any(method == "PUT" and written in path for method, path in proxy.requests)
    released = f"{src}/{namespace}/base-images/img0:3.0-42"
    assert any(missing in p for p in check(released, skopeo118)), check(released, skopeo118)
    completed = run_cli(*args, "--to", f"{src}/{namespace}")
    assert completed.returncode == 0, completed.stderr
    assert check(released, skopeo118) == ()


def test_a_registry_with_the_referrers_api_gets_no_referrers_tag(
        pushed: Any, ours: Signer, skopeo118: VerifyingSkopeo, registry: Registry,
        tmp_path: Path) -> None:
    """Through a front that serves the referrers API (and says OCI-Subject), the
    attestations are found through the API and no sha256-<hex> tag is written; mirror
    reads them through the API and writes them through a mirror's own API front."""
    from aipcc_build.publish.referrers import referrers_tag
    from tests.support.referrers_front import ReferrersFront

    ref, digest = pushed("api", "3.0-42")
    site = make_registry(tmp_path / "site")
    try:
        with ReferrersFront(registry.host) as front, ReferrersFront(site.host) as site_front:
            fronted = ref.replace(registry.host, front.host)
            release(fronted, digest, ours)
            assert check(fronted, skopeo118) == ()
            assert len(front.referrers[("rel/api", digest)]) == 2
            report = tmp_path / "build-report.json"
            report.write_text(json.dumps({
                "schema": 1, "build_id": "42", "registry": front.host,
                "images": [{"key": "base/api", "name": "api", "kind": "base",
                            "reference": fronted, "status": "ok", "digest": digest}]}))
            done = run_cli("mirror", "--report", str(report), "--to",
                           f"docker://{site_front.host}/site", "--no-tls-verify", "--out",
                           str(tmp_path))
            assert done.returncode == 0, done.stderr
            assert len(site_front.referrers[("site/rel/api", digest)]) == 2
            problems = check(f"{site_front.host}/site/rel/api:3.0-42", skopeo118)
            assert problems and all("was signed as" in p for p in problems), problems
        for host, path in ((registry.host, "rel/api"), (site.host, "site/rel/api")):
            client, _ = Registries(tls_verify=False).of(f"{host}/{path}")
            assert client.get_manifest(path, referrers_tag(digest)) is None
            assert client.referrers(path, digest) is None  # the registry itself has no API
    finally:
        site.stop()


def test_promote_refuses_to_sign_what_the_validator_fails(
        registry: Registry, base_image: str, skopeo118: VerifyingSkopeo,
        tmp_path: Path) -> None:
    """The report says ok; the validator, run again on the digest to release, finds CUDA
    12.9 in an image labelled 12.8: exit 1 naming it, nothing copied, nothing signed."""
    from tests.support.layers import version_json

    local = f"localhost/aipcc-test-signing/mixed-{uuid.uuid4().hex[:8]}"
    subprocess.run(["buildah", "build", "-q", "-t", local, "-f", "-", "."], input=(
        f"FROM {base_image}\nLABEL ai.aipcc.accelerator=cuda "
        "ai.aipcc.accelerator.version=12.8\nRUN mkdir -p /usr/local/cuda-12.9 && "
        f"printf '%s' '{version_json('12.9.1')}' > /usr/local/cuda-12.9/version.json\n"),
        text=True, check=True, capture_output=True)
    try:
        ref = f"{registry.host}/build/cuda:3.0-42"
        digest = push(local, ref)
    finally:
        subprocess.run(["buildah", "rmi", "-f", local], capture_output=True)
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({
        "schema": 1, "build_id": "42", "registry": f"{registry.host}/build",
        "product": {"name": "aipcc", "version": "3.0", "moving_tags": []},
        "images": [{"key": "devel/cuda", "name": "cuda", "kind": "devel", "reference": ref,
                    "status": "ok", "digest": digest}]}))
    done = run_cli("promote", "--report", str(report), "--to", f"{registry.host}/release",
                   "--no-tls-verify", "--sign-by-sigstore-private-key",
                   str(skopeo118.work / "ours.private"), "--sign-passphrase-file",
                   str(skopeo118.work / "pass"))
    assert done.returncode == 1, done.stderr
    assert "does not pass" in done.stderr and "failed" in done.stderr
    assert digest_at(f"{registry.host}/release/cuda:3.0-42") is None


def test_promote_can_require_a_passing_verdict_attestation(
        pushed: Any, ours: Signer, other: Signer, skopeo118: VerifyingSkopeo,
        registry: Registry, tmp_path: Path) -> None:
    attested, attested_digest = pushed("attested", "3.0-42")
    release(attested, attested_digest, ours)
    bare, bare_digest = pushed("bare", "3.0-42")
    failed, failed_digest = pushed("failed", "3.0-42")
    release(failed, failed_digest, ours, failed_validator)
    foreign, foreign_digest = pushed("foreign", "3.0-42")  # ok, but by another key
    release(foreign, foreign_digest, other)
    for name, ref, digest, code in (("attested", attested, attested_digest, 0),
                                    ("bare", bare, bare_digest, 1),
                                    ("failed", failed, failed_digest, 1),
                                    ("foreign", foreign, foreign_digest, 1)):
        report = tmp_path / f"{name}.json"
        report.write_text(json.dumps({
            "schema": 1, "build_id": "42", "registry": f"{registry.host}/rel",
            "product": {"name": "aipcc", "version": "3.0", "moving_tags": []},
            "images": [{"key": f"base/{name}", "name": name, "kind": "base",
                        "reference": ref, "status": "ok", "digest": digest}]}))
        done = run_cli("promote", "--report", str(report), "--to", f"{registry.host}/prod",
                       "--no-tls-verify", "--require-verdict-by",
                       str(skopeo118.work / "ours.pub"))
        assert done.returncode == code, (name, done.stderr)
        there = digest_at(f"{registry.host}/prod/{name}:3.0-42")
        assert there == (digest if code == 0 else None), name
        if code:
            assert "no passing verdict attestation" in done.stderr and name in done.stderr


def test_promote_attests_the_verdict_the_build_report_records(
        pushed: Any, ours: Signer, skopeo118: VerifyingSkopeo, registry: Registry,
        tmp_path: Path) -> None:
    """A report that records the gate's verdict at build: promote attests that verdict
    (its findings, which the image itself would not give a re-run) bound to the released
    digest, and refuses, exit 1, nothing copied, an image whose recorded verdict failed."""
    from aipcc_build.imagebuild.build_report import verdict_record
    from aipcc_build.publish.referrers import list_referrers, read_artifact

    ref, digest = pushed("gated", "3.0-42")
    failed, failed_digest = pushed("gatefailed", "3.0-42")
    for name, source, at, judge, code in (
            ("gatefailed", failed, failed_digest, failed_validator, 1),
            ("gated", ref, digest, ok_validator, 0)):
        report = tmp_path / f"{name}.json"
        report.write_text(json.dumps({
            "schema": 1, "build_id": "42", "registry": f"{registry.host}/rel",
            "product": {"name": "aipcc", "version": "3.0", "moving_tags": []},
            "images": [{"key": f"base/{name}", "name": name, "kind": "base",
                        "reference": source, "status": "ok", "digest": at,
                        "verdict": verdict_record(judge("containers-storage:x")[0])}]}))
        done = run_cli("promote", "--report", str(report), "--to", f"{registry.host}/gate",
                       "--no-tls-verify", "--sign-by-sigstore-private-key",
                       str(skopeo118.work / "ours.private"), "--sign-passphrase-file",
                       str(skopeo118.work / "pass"))
        assert done.returncode == code, (name, done.stderr)
        there = digest_at(f"{registry.host}/gate/{name}:3.0-42")
        assert there == (at if code == 0 else None), name
        assert code == 0 or "does not pass" in done.stderr and "failed" in done.stderr
    released = f"{registry.host}/gate/gated:3.0-42"
    assert check(released, skopeo118) == ()
    client, path = Registries(tls_verify=False).of(f"{registry.host}/gate/gated")
    [found] = list_referrers(client, path, digest, attestations.VERDICT_ARTIFACT_TYPE)
    artifact = read_artifact(client, path, str(found["digest"]))
    assert artifact is not None
    document, why = attestations.open_envelope(artifact[1], ours.public_key)
    assert document is not None, why
    assert attestations.subject_digests(document) == [digest]
    predicate = document["predicate"]
    assert predicate["verdict"] == "ok" and predicate["matrixEntry"] == "base/gated"
    [sbom] = list_referrers(client, path, digest, attestations.SBOM_MEDIA_TYPE)
    found_sbom = read_artifact(client, path, str(sbom["digest"]))
    assert found_sbom is not None and b"cudart" in found_sbom[1]  # the report's finding


def test_mirror_takes_the_release_manifest_promote_wrote(
        pushed: Any, skopeo118: VerifyingSkopeo, registry: Registry, tmp_path: Path) -> None:
    """promote --manifest, then mirror --report of that manifest: exactly the released
    references (every tag) reach the site, signatures and attestations with them, and
    verify passes there but for the identity (the signatures name the released names)."""
    from aipcc_build.imagebuild.build_report import verdict_record

    ref, digest = pushed("manifested", "3.0-42")
    report = tmp_path / "build-report.json"
    report.write_text(json.dumps({
        "schema": 1, "build_id": "42", "registry": f"{registry.host}/rel",
        "product": {"name": "aipcc", "version": "3.0", "moving_tags": ["latest"]},
        "images": [{"key": "base/manifested", "name": "manifested", "kind": "base",
                    "reference": ref, "status": "ok", "digest": digest,
                    "verdict": verdict_record(ok_validator("x")[0])}]}))
    manifest = tmp_path / "release.json"
    done = run_cli("promote", "--report", str(report), "--to", f"{registry.host}/out",
                   "--no-tls-verify", "--manifest", str(manifest),
                   "--sign-by-sigstore-private-key", str(skopeo118.work / "ours.private"),
                   "--sign-passphrase-file", str(skopeo118.work / "pass"))
    assert done.returncode == 0, done.stderr
    released = {image["reference"] for image in json.loads(manifest.read_text())["images"]}
    assert released == {f"{registry.host}/out/manifested:{t}" for t in ("3.0-42", "latest")}
    site = make_registry(tmp_path / "site")
    try:
        out = tmp_path / "mirror-out"
        out.mkdir()
        done = run_cli("mirror", "--report", str(manifest), "--to",
                       f"docker://{site.host}/site", "--no-tls-verify", "--key",
                       str(skopeo118.work / "ours.pub"), "--out", str(out))
        assert done.returncode == 0, done.stderr
        policy = yaml.safe_load((out / "clusterimagepolicy.yaml").read_text())
        assert policy["spec"]["scopes"] == [f"{registry.host}/out/manifested"]
        for tag in ("3.0-42", "latest"):
            there = f"{site.host}/site/out/manifested:{tag}"
            assert digest_at(there) == digest
            problems = check(there, skopeo118)
            assert problems and all("was signed as" in p for p in problems), problems
        dry = tmp_path / "dry.json"
        dry.write_text(json.dumps({"schema": 1, "dry_run": True, "images": [
            {"key": "base/x", "reference": ref, "digest": digest, "pull": ref}]}))
        refused = run_cli("mirror", "--report", str(dry), "--to",
                          f"docker://{site.host}/site", "--no-tls-verify")
        assert refused.returncode == 2 and "dry run" in refused.stderr, refused.stderr
    finally:
        site.stop()


def test_a_real_build_records_the_verdict_promote_attests_and_verify_checks(
        tmp_path: Path, base_image: str, namespace: str, registry: Registry,
        skopeo118: VerifyingSkopeo, ours: Signer) -> None:
    """`aipcc-build matrix --push` (real buildah, the gate in the worker) records each
    image's verdict bound to the digest it pushed; promote with a key attests that verdict
    in a second repository, and verify passes there: the predicate names the build and
    `ok`, its subject is the digest the build report records."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    from aipcc_build.matrix import load
    from aipcc_build.publish.referrers import list_referrers, read_artifact
    from aipcc_build.render import apply, render_all

    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "base.j2").write_text("FROM {{ os_from }}\nRUN echo ok > /ok\n")
    (tmp_path / "matrix").mkdir()
    matrix_path = tmp_path / "matrix" / "test.yaml"
    matrix_path.write_text(
        "schema: 1\nproduct: {name: t, version: '3.0'}\n"
        "registry: localhost/aipcc-test-sched/unused\n"
        f"os:\n  bb: {{from: {base_image}}}\naccelerators:\n  cpu: {{}}\n"
        "images:\n  base: {template: base.j2, os: [bb]}\n")
    matrix = load(matrix_path)
    apply(matrix, render_all(matrix), check=False, remove_stale=False)
    built = run_cli("--matrix", "matrix/test.yaml", "matrix", "--push", "--registry",
                    namespace, "--no-tls-verify", "--build-id", "4242", cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    [entry] = json.loads((tmp_path / "build-report.json").read_text())["images"]
    digest = entry["digest"]
    assert entry["status"] == "ok" and entry["verdict"]["verdict"] == "ok", entry
    assert digest_at(entry["reference"]) == digest

    release_ns = f"{registry.host}/rel{uuid.uuid4().hex[:6]}"
    work = skopeo118.work
    promoted = run_cli("promote", "--report", "build-report.json", "--to", release_ns,
                       "--no-tls-verify", "--sign-by-sigstore-private-key",
                       str(work / "ours.private"), "--sign-passphrase-file",
                       str(work / "pass"), cwd=tmp_path)
    assert promoted.returncode == 0, promoted.stderr
    released = f"{release_ns}/base/cpu-bb:3.0-4242"
    assert digest_at(released) == digest
    verified = run_cli("verify", "--key", str(work / "ours.pub"), "--no-tls-verify", released)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    client, path = Registries(tls_verify=False).of(released.rsplit(":", 1)[0])
    [found] = list_referrers(client, path, digest, attestations.VERDICT_ARTIFACT_TYPE)
    artifact = read_artifact(client, path, str(found["digest"]))
    assert artifact is not None
    sealed = json.loads(artifact[1])
    payload = base64.b64decode(sealed["payload"])
    pae = b"DSSEv1 %d %s %d %s" % (len(sealed["payloadType"]),
                                   sealed["payloadType"].encode(), len(payload), payload)
    public = load_pem_public_key((work / "ours.pub").read_bytes())
    assert isinstance(public, ec.EllipticCurvePublicKey)
    public.verify(base64.b64decode(sealed["signatures"][0]["sig"]), pae,
                  ec.ECDSA(hashes.SHA256()))  # the DSSE signature, by cryptography
    document = json.loads(payload)
    assert document["subject"][0]["digest"] == {"sha256": digest.partition(":")[2]}
    predicate = document["predicate"]
    assert (predicate["verdict"], predicate["buildId"], predicate["matrixEntry"]) == \
        ("ok", "4242", "base/cpu-bb")
    # The report's verdict, not a second run's: its findings are what the gate counted.
    statuses: dict[str, int] = {}
    for finding in entry["verdict"]["findings"]:
        statuses[finding["status"]] = statuses.get(finding["status"], 0) + 1
    assert predicate["evidence"]["findings"] == statuses
    # Its SBOM, bound to the same digest, valid CycloneDX by the maintained library.
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    [sbom] = list_referrers(client, path, digest, attestations.SBOM_MEDIA_TYPE)
    found_sbom = read_artifact(client, path, str(sbom["digest"]))
    assert found_sbom is not None and found_sbom[0]["subject"]["digest"] == digest
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(found_sbom[1].decode()) is None


def test_verify_exits_1_naming_each_problem_and_2_before_asking_on_bad_input(
        pushed: Any, skopeo118: VerifyingSkopeo, tmp_path: Path) -> None:
    unsigned, _ = pushed("cli-unsigned")
    pub = str(skopeo118.work / "ours.pub")
    done = run_cli("verify", "--key", pub, "--no-tls-verify", unsigned)
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert unsigned in said and "is not signed" in said and "no verdict attestation" in said
    assert "Traceback" not in said
    (tmp_path / "rsa.pub").write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n"
                                      "-----END PUBLIC KEY-----\n")
    for args, expected in (((unsigned.replace(":1.0", ""),), "is not HOST/REPOSITORY:TAG"),
                           (("--key", str(tmp_path / "rsa.pub"), unsigned),
                            "not a PEM public key"),
                           (("--key", str(skopeo118.work / "ours.private"), unsigned),
                            "not a PEM public key")):
        if args[0] != "--key":
            args = ("--key", pub, *args)
        refused = run_cli("verify", "--no-tls-verify", *args)
        assert refused.returncode == 2, refused.stderr
        assert expected in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
