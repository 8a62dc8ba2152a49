"""Key files, signatures, the SBOM and the DSSE verdict, checked with maintained libraries
(cryptography, CycloneDX's own schema). Keys from real skopeo are tested in
tests/integration/test_signing.py."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from aipcc_build.errors import InputError
from aipcc_build.publish import attestations
from aipcc_build.publish.signing import (
    load_public_key,
    load_signer,
    payload,
    read_payload,
    signature_tag,
    write_private_key,
)
from aipcc_build.validate.results import Expectation, Finding, ImageVerdict

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("keys")
    (root / "pass").write_text("s3cret\n")
    write_private_key(str(root / "cosign.key"), b"s3cret", n=1 << 10)
    return root


def test_a_key_pair_signs_and_verifies(keys: Path) -> None:
    signer = load_signer(str(keys / "cosign.key"), str(keys / "pass"))
    public = load_public_key(str(keys / "cosign.pub"))
    signature = signer.sign(b"data")
    assert public.verifies(b"data", signature)
    assert not public.verifies(b"other", signature)
    assert "s3cret" not in repr(signer)


@pytest.mark.parametrize("content, passphrase, expected", [
    (None, "wrong\n", "does not decrypt"),
    (b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "s3cret",
     "not a sigstore private key"),
    (b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n"
     + base64.b64encode(b'{"kdf": {}}') + b"\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n",
     "s3cret", "its content is not cosign's"),
    (b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n"
     + base64.b64encode(json.dumps({
         "kdf": {"name": "scrypt", "params": {"N": 1 << 30, "r": 8, "p": 1}, "salt": ""},
         "cipher": {"name": "nacl/secretbox", "nonce": ""}, "ciphertext": ""}).encode())
     + b"\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n", "s3cret", "out of range"),
    (b"\x00" * 100_000, "s3cret", "larger than"),
])
def test_a_bad_private_key_is_one_input_error(keys: Path, tmp_path: Path,
                                              content: bytes | None, passphrase: str,
                                              expected: str) -> None:
    key = keys / "cosign.key"
    if content is not None:
        key = tmp_path / "bad.key"
        key.write_bytes(content)
    (tmp_path / "pass").write_text(passphrase)
    with pytest.raises(InputError) as caught:
        load_signer(str(key), str(tmp_path / "pass"))
    assert expected in str(caught.value) and str(key) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_key_or_passphrase_file_is_named(keys: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the private key"):
        load_signer(str(tmp_path / "absent.key"), None)
    with pytest.raises(InputError, match="cannot read the passphrase file"):
        load_signer(str(keys / "cosign.key"), str(tmp_path / "absent"))
    with pytest.raises(InputError, match="not a PEM public key"):
        load_public_key(str(keys / "cosign.key"))


def test_a_fifo_or_a_directory_for_a_key_file_is_refused_without_waiting(
        keys: Path, tmp_path: Path) -> None:
    # A FIFO with no writer used to block the open for ever.
    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"not a private key: not a regular file \(a FIFO\)"):
        load_signer(str(fifo), None)
    with pytest.raises(InputError, match=r"not a passphrase file: .*\(a FIFO\)"):
        load_signer(str(keys / "cosign.key"), str(fifo))
    with pytest.raises(InputError, match=r"not a public key: .*\(a directory\)"):
        load_public_key(str(tmp_path))
    with pytest.raises(InputError, match=r"\(a device\)"):
        load_public_key("/dev/zero")


def test_a_background_decryption_refuses_a_wrong_passphrase_when_waited_for(
        keys: Path, tmp_path: Path) -> None:
    (tmp_path / "pass").write_text("wrong\n")
    pending = load_signer(str(keys / "cosign.key"), str(tmp_path / "pass"), background=True)
    with pytest.raises(InputError, match="does not decrypt"):
        pending.ready()
    signer = load_signer(str(keys / "cosign.key"), str(keys / "pass"), background=True)
    assert load_public_key(str(keys / "cosign.pub")).verifies(b"x", signer.sign(b"x"))


@pytest.mark.parametrize("n, r, p", [(2, 1, 1), (1 << 10, 8, 1), (1 << 12, 4, 3)])
def test_the_scrypt_key_is_cryptographys(n: int, r: int, p: int) -> None:
    """libsodium's scrypt (the faster one) derives the key cosign's files were made with."""
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    from aipcc_build.publish.signing import _scrypt

    salt = b"salt" * 8
    assert _scrypt(b"pass", salt, n, r, p) == Scrypt(salt=salt, length=32, n=n, r=r,
                                                     p=p).derive(b"pass")


def test_a_p256_public_key_read_without_serialization_is_the_same_key(
        keys: Path, tmp_path: Path) -> None:
    """The P-256 SubjectPublicKeyInfo read directly; every other key through
    cryptography's reader, and refused unless P-256; a point off the curve refused."""
    pem = (keys / "cosign.pub").read_bytes()
    assert load_public_key(str(keys / "cosign.pub")).pem() == \
        load_pem_public_key(pem).public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo)
    other = ec.generate_private_key(ec.SECP384R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    (tmp_path / "p384.pub").write_bytes(other)
    with pytest.raises(InputError, match="not an ECDSA P-256 public key"):
        load_public_key(str(tmp_path / "p384.pub"))
    der = base64.b64decode(b"".join(pem.splitlines()[1:-1]))
    off_curve = der[:-1] + bytes([der[-1] ^ 1])
    (tmp_path / "off.pub").write_bytes(b"-----BEGIN PUBLIC KEY-----\n"
                                       + base64.b64encode(off_curve)
                                       + b"\n-----END PUBLIC KEY-----\n")
    with pytest.raises(InputError, match="not on the curve"):
        load_public_key(str(tmp_path / "off.pub"))


def test_the_payload_is_what_containers_image_reads() -> None:
    data = payload("quay.io/aipcc/cuda:3.0-42", DIGEST, "aipcc-build test")
    critical = json.loads(data)["critical"]
    assert critical == {"identity": {"docker-reference": "quay.io/aipcc/cuda:3.0-42"},
                        "image": {"docker-manifest-digest": DIGEST},
                        "type": "cosign container image signature"}
    claim = read_payload(data)
    assert claim is not None and claim.digest == DIGEST
    assert read_payload(b'{"critical": {"type": "other"}}') is None
    assert signature_tag(DIGEST) == "sha256-" + "ab" * 32 + ".sig"


def verdict(status: str = "ok") -> ImageVerdict:
    return ImageVerdict(
        ref="r", platform="linux/amd64", digest=DIGEST,
        expected=Expectation("cuda", "12.8", source="labels"),
        toolkits={"cuda": ("12.8",)},
        findings=(Finding(status, "package", "/usr/local/cuda-12.8/lib64/libcudart.so.12",
                          "matches", toolkit="cuda", version="12.8", component="cudart",
                          component_version="12.8.90", layer_digest="sha256:" + "1" * 64,
                          distribution="nvidia-cuda-runtime-cu12"),))


def test_the_sbom_is_valid_cyclonedx_with_evidence() -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    document = attestations.sbom(verdict(), DIGEST, "quay.io/aipcc/cuda@" + DIGEST)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(document.decode()) is None
    component = json.loads(document)["components"][0]
    assert (component["name"], component["version"]) == ("cudart", "12.8.90")
    assert {"name": "aipcc:toolkit-release", "value": "12.8"} in component["properties"]
    occurrence = component["evidence"]["occurrences"][0]
    assert "libcudart.so.12" in occurrence["location"] and "sha256:111" in \
        occurrence["location"]
    assert "nvidia-cuda-runtime-cu12" in occurrence["additionalContext"]
    assert attestations.check_sbom(document) == ""


def test_verifying_loads_no_openssl_backend(keys: Path) -> None:
    """A signature checked (and a wrong one refused) without cryptography's OpenSSL
    backend, which ECDSA's constructor loads and verifying does not use."""
    import subprocess
    import sys

    signer = load_signer(str(keys / "cosign.key"), str(keys / "pass"))
    signature = signer.sign(b"payload")
    code = ("import sys\n"
            "from aipcc_build.publish.signing import load_public_key\n"
            "key = load_public_key(sys.argv[1])\n"
            "print(key.verifies(b'payload', bytes.fromhex(sys.argv[2])),\n"
            "      key.verifies(b'payloaD', bytes.fromhex(sys.argv[2])),\n"
            "      key.verifies(b'payload', b'0'),\n"
            "      'cryptography.hazmat.backends.openssl' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code, str(keys / "cosign.pub"),
                           signature.hex()], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "False", "False", "False"], done.stderr


def test_the_sbom_check_refuses_a_toolkit_component_without_what_the_issue_promises(
) -> None:
    """verify's check of the SBOM, without loading a schema: CycloneDX 1.5 or 1.6, each
    toolkit component with its version, evidence and release. An SBOM `sbom` writes
    passes it (and the schema) even for a component whose release the validator did not
    know; a component of no toolkit (a label, a setting) needs none of it."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    unknown = ImageVerdict(ref="r", platform="linux/amd64", findings=(
        Finding("warning", "package", "/usr/lib/libcublas.so.12", "no release",
                toolkit="cuda", component="cublas", component_version="12.99.1"),
        Finding("violation", "config", "config:Labels/x", "labels", component="labels",
                component_version="cuda 12.8")))
    for written in (attestations.sbom(verdict(), DIGEST, "img"),
                    attestations.sbom(unknown, DIGEST, "img")):
        assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(written.decode()) is None
        assert attestations.check_sbom(written) == ""
    document = json.loads(attestations.sbom(verdict(), DIGEST, "img"))

    def refused(change: Any) -> str:
        copy = json.loads(json.dumps(document))
        change(copy)
        return attestations.check_sbom(json.dumps(copy).encode())

    component = "the SBOM's cuda component cudart"
    assert refused(lambda d: d.update(specVersion="1.4")) == \
        "the SBOM is not a CycloneDX 1.5 or 1.6 document"
    assert refused(lambda d: d.update(components={})) == \
        "the SBOM is not a CycloneDX 1.5 or 1.6 document"
    assert refused(lambda d: d["components"].append("x")) == \
        "the SBOM lists a component that is not an object"
    assert refused(lambda d: d["components"][0].pop("version")) == \
        f"{component} has no version"
    assert refused(lambda d: d["components"][0].update(version=" ")) == \
        f"{component} has no version"
    assert refused(lambda d: d["components"][0].pop("evidence")) == \
        f"{component} has no evidence of where it was found"
    assert refused(lambda d: d["components"][0]["evidence"].update(occurrences=[])) == \
        f"{component} has no evidence of where it was found"
    assert refused(lambda d: d["components"][0]["evidence"]["occurrences"][0].pop(
        "location")) == f"{component} has no evidence of where it was found"
    assert refused(lambda d: d["components"][0]["properties"].pop(1)) == \
        f"{component} names no toolkit release (aipcc:toolkit-release)"
    assert attestations.check_sbom(b"[1") == "the SBOM is not JSON"


def test_the_verdict_envelope_is_dsse_signed_by_the_key(keys: Path) -> None:
    signer = load_signer(str(keys / "cosign.key"), str(keys / "pass"))
    document = attestations.statement(verdict("violation"), DIGEST, "img",
                                      attestations.Provenance("devel/cuda", "42"))
    sealed = json.loads(attestations.envelope(document, signer))
    body = base64.b64decode(sealed["payload"])
    pae = b"DSSEv1 %d %s %d %s" % (len(sealed["payloadType"]),
                                   sealed["payloadType"].encode(), len(body), body)
    public = load_pem_public_key((keys / "cosign.pub").read_bytes())
    assert isinstance(public, ec.EllipticCurvePublicKey)
    public.verify(base64.b64decode(sealed["signatures"][0]["sig"]), pae,
                  ec.ECDSA(hashes.SHA256()))  # raises when it does not verify
    statement = json.loads(body)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"][0]["digest"] == {"sha256": "ab" * 32}
    predicate = statement["predicate"]
    assert predicate["verdict"] == "failed"
    assert predicate["expected"]["accelerator"] == "cuda"
    assert (predicate["matrixEntry"], predicate["buildId"]) == ("devel/cuda", "42")
    opened, why = attestations.open_envelope(attestations.envelope(document, signer),
                                             load_public_key(str(keys / "cosign.pub")))
    assert opened == document and why == ""
    tampered = dict(sealed, payload=base64.b64encode(body.replace(b"failed", b"ok")).decode())
    assert attestations.open_envelope(json.dumps(tampered).encode(),
                                      load_public_key(str(keys / "cosign.pub")))[0] is None


def _sealed(path: Path, key: Any, passphrase: bytes) -> None:
    """KEY in cosign's encrypted format (as `cosign import-key-pair` writes any key)."""
    import os

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
    from nacl.secret import SecretBox

    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    salt, nonce = os.urandom(32), os.urandom(24)
    secret = Scrypt(salt=salt, length=32, n=1 << 10, r=8, p=1).derive(passphrase)
    body = json.dumps({
        "kdf": {"name": "scrypt", "params": {"N": 1 << 10, "r": 8, "p": 1},
                "salt": base64.b64encode(salt).decode()},
        "cipher": {"name": "nacl/secretbox", "nonce": base64.b64encode(nonce).decode()},
        "ciphertext": base64.b64encode(
            SecretBox(secret).encrypt(der, nonce).ciphertext).decode()}).encode()
    path.write_bytes(b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n"
                     + base64.b64encode(body)
                     + b"\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n")


def test_a_key_of_another_algorithm_is_refused_naming_it(tmp_path: Path) -> None:
    """An RSA or P-384 key, well sealed (cosign imports such keys), signs nothing here and
    verifies nothing: containers/image's sigstore signatures here are ECDSA P-256."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    (tmp_path / "pass").write_text("s3cret\n")
    for name, key in (("rsa", rsa.generate_private_key(65537, 2048)),
                      ("p384", ec.generate_private_key(ec.SECP384R1()))):
        _sealed(tmp_path / f"{name}.key", key, b"s3cret")
        with pytest.raises(InputError, match="not an ECDSA P-256 key") as caught:
            load_signer(str(tmp_path / f"{name}.key"), str(tmp_path / "pass"))
        assert str(tmp_path / f"{name}.key") in str(caught.value)
        (tmp_path / f"{name}.pub").write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        with pytest.raises(InputError, match="not an ECDSA P-256 public key"):
            load_public_key(str(tmp_path / f"{name}.pub"))
    with pytest.raises(InputError, match=r"not a private key: not a regular file \(a directory"):
        load_signer(str(tmp_path), str(tmp_path / "pass"))


def test_signing_with_a_cosign_key_imports_no_cryptography(keys: Path) -> None:
    """The key is read and signs through libcrypto: a signed promote's first copy waits
    for the key, and cryptography's import took a third as long as its scrypt. The
    signatures verify with cryptography, and the key's public half is the key file's."""
    import subprocess
    import sys

    from aipcc_build.publish import libcrypto

    if libcrypto.load_signing() is None:
        pytest.skip("no libcrypto.so.3 here")
    code = ("import sys\n"
            "from aipcc_build.publish.signing import load_signer\n"
            "signer = load_signer(sys.argv[1], sys.argv[2], background=True)\n"
            "print(signer.sign(b'payload').hex(), signer.public_key.pem().hex(),\n"
            "      signer.public_key.verifies(b'payload', signer.sign(b'payload')),\n"
            "      any(name.startswith('cryptography') for name in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code, str(keys / "cosign.key"),
                           str(keys / "pass")], capture_output=True, text=True, timeout=60)
    signature, pem, verified, imported = done.stdout.split()
    assert (verified, imported) == ("True", "False"), done.stderr
    public = load_pem_public_key((keys / "cosign.pub").read_bytes())
    assert bytes.fromhex(pem) == (keys / "cosign.pub").read_bytes()
    public.verify(bytes.fromhex(signature), b"payload",  # type: ignore[union-attr,call-arg]
                  ec.ECDSA(hashes.SHA256()))


def test_without_libcrypto_cryptography_signs(keys: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from aipcc_build.publish import libcrypto

    monkeypatch.setattr(libcrypto, "_signing", [None])
    monkeypatch.setattr(libcrypto, "_loaded", [None])
    signer = load_signer(str(keys / "cosign.key"), str(keys / "pass"))
    assert not isinstance(signer._key, libcrypto.P256PrivateKey)
    assert load_public_key(str(keys / "cosign.pub")).verifies(b"x", signer.sign(b"x"))
    assert signer.public_key.pem() == (keys / "cosign.pub").read_bytes()
