"""The libcrypto verifier (publish.libcrypto, through ctypes) against cryptography's, case
by case: random keys and messages, valid signatures and every way of spoiling one, keys
of other curves and types, points off the curve. Both must say the same of each; where
libcrypto is missing, cryptography answers alone."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aipcc_build.errors import InputError
from aipcc_build.publish import libcrypto
from aipcc_build.publish.libcrypto import P256_SPKI_PREFIX
from aipcc_build.publish.signing import (
    LibcryptoPublicKey,
    PublicKey,
    load_public_key,
)

pytestmark = pytest.mark.skipif(libcrypto.load() is None, reason="no libcrypto.so.3 here")

ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551  # P-256's n
FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def spki(key: Any) -> bytes:
    return bytes(key.public_bytes(serialization.Encoding.DER,
                                  serialization.PublicFormat.SubjectPublicKeyInfo))


def pem_file(path: Path, der: bytes) -> str:
    path.write_bytes(b"-----BEGIN PUBLIC KEY-----\n" + base64.b64encode(der)
                     + b"\n-----END PUBLIC KEY-----\n")
    return str(path)


def both(der: bytes) -> tuple[libcrypto.P256Key, PublicKey]:
    native = libcrypto.p256_key(der[len(P256_SPKI_PREFIX):])
    assert native is not None
    return native, PublicKey(ec.EllipticCurvePublicKey.from_encoded_point(
        ec.SECP256R1(), der[len(P256_SPKI_PREFIX):]), "k")


def der_integer(value: int, pad: int = 0) -> bytes:
    body = value.to_bytes(max(1, (value.bit_length() + 8) // 8), "big", signed=True)
    return b"\x02" + bytes([len(body) + pad]) + b"\0" * pad + body


# Each spoils (or re-encodes) a valid DER signature (r, s): what both verifiers must judge alike.
def _ber_long_length(r: int, s: int) -> bytes:
    body = der_integer(r) + der_integer(s)
    return b"\x30\x81" + bytes([len(body)]) + body


MUTATIONS: dict[str, Callable[[int, int], bytes]] = {
    "valid": lambda r, s: encode_dss_signature(r, s),
    "high S": lambda r, s: encode_dss_signature(r, ORDER - s),
    "r zero": lambda r, s: encode_dss_signature(0, s),
    "s zero": lambda r, s: encode_dss_signature(r, 0),
    "r plus n": lambda r, s: encode_dss_signature(r + ORDER, s),
    "s plus n": lambda r, s: encode_dss_signature(r, s + ORDER),
    "r is n": lambda r, s: encode_dss_signature(ORDER, s),
    "r negative": lambda r, s: b"\x30" + bytes([len(der_integer(-r) + der_integer(s))])
    + der_integer(-r) + der_integer(s),
    "BER long length": _ber_long_length,
    "integer padded": lambda r, s: b"\x30" + bytes([len(der_integer(r, 1) + der_integer(s))])
    + der_integer(r, 1) + der_integer(s),
    "extra byte": lambda r, s: encode_dss_signature(r, s) + b"\0",
    "truncated": lambda r, s: encode_dss_signature(r, s)[:-1],
    "swapped": lambda r, s: encode_dss_signature(s, r),
    "empty": lambda r, s: b"",
    "raw r||s": lambda r, s: r.to_bytes(32, "big") + s.to_bytes(32, "big"),
    "indefinite length": lambda r, s: b"\x30\x80" + der_integer(r) + der_integer(s)
    + b"\0\0",
}


@pytest.fixture(scope="module")
def signer() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@FUZZ
@given(secret=st.integers(1, ORDER - 1), message=st.binary(max_size=300),
       mutation=st.sampled_from(sorted(MUTATIONS)), flip=st.none() | st.integers(0, 8 * 80),
       other_message=st.booleans())
def test_libcrypto_and_cryptography_agree_on_every_signature(
        secret: int, message: bytes, mutation: str, flip: Optional[int],
        other_message: bool) -> None:
    key = ec.derive_private_key(secret, ec.SECP256R1())
    native, reference = both(spki(key.public_key()))
    r, s = decode_dss_signature(key.sign(message, ec.ECDSA(hashes.SHA256())))
    signature = MUTATIONS[mutation](r, s)
    if flip is not None and flip < 8 * len(signature):
        signature = bytearray(signature)
        signature[flip // 8] ^= 1 << flip % 8
        signature = bytes(signature)
    checked = message + b"." if other_message else message
    expected = reference.verifies(checked, signature)
    assert native.verifies(checked, signature) is expected
    if mutation in ("valid", "high S") and flip is None and not other_message:
        assert expected  # OpenSSL takes a high S, as containers/image's Go verifier does


@FUZZ
@given(signature=st.binary(max_size=200), message=st.binary(max_size=64))
def test_libcrypto_and_cryptography_agree_on_random_bytes(
        signer: ec.EllipticCurvePrivateKey, signature: bytes, message: bytes) -> None:
    native, reference = both(spki(signer.public_key()))
    assert native.verifies(message, signature) is reference.verifies(message, signature)


def loaded(path: str) -> tuple[str, Optional[PublicKey]]:
    """What load_public_key says of PATH: ("", the key) or (the refusal, None)."""
    try:
        return "", load_public_key(path)
    except InputError as exc:
        return str(exc), None


def without_libcrypto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(libcrypto, "_loaded", [None])


@FUZZ
@example(point=b"\x06" + b"\x01" * 64)
@example(point=b"\x02" + b"\x00" * 64)
@example(point=b"\x04" + b"\xff" * 64)
@given(point=st.binary(min_size=65, max_size=65)
       | st.builds(lambda p: b"\x04" + p, st.binary(min_size=64, max_size=64)))
def test_a_key_file_is_read_as_before_whatever_its_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: bytes) -> None:
    """A P-256 SubjectPublicKeyInfo of any 65 bytes: refused with the message the
    cryptography reading gives (off the curve, hybrid, compressed with junk), or read as
    the same key."""
    path = pem_file(tmp_path / "k.pub", P256_SPKI_PREFIX + point)
    native_message, native = loaded(path)
    with monkeypatch.context() as patched:
        without_libcrypto(patched)
        message, reference = loaded(path)
    assert native_message == message
    if reference is not None:
        assert isinstance(native, LibcryptoPublicKey) and native.pem() == reference.pem()


def test_an_off_curve_point_is_refused_by_libcrypto_itself(
        signer: ec.EllipticCurvePrivateKey, tmp_path: Path) -> None:
    der = spki(signer.public_key())
    off_curve = der[:-1] + bytes([der[-1] ^ 1])
    point = der[len(P256_SPKI_PREFIX):]
    assert libcrypto.p256_key(point) is not None
    assert libcrypto.p256_key(off_curve[len(P256_SPKI_PREFIX):]) is None
    assert libcrypto.p256_key(b"\6" + point[1:]) is None  # hybrid: libcrypto would take it
    assert libcrypto.p256_key(point + b"\0") is None and libcrypto.p256_key(b"") is None
    with pytest.raises(InputError, match="not an ECDSA P-256 public key: its point is not "
                                         "on the curve"):
        load_public_key(pem_file(tmp_path / "off.pub", off_curve))


@pytest.mark.parametrize("make", [
    lambda: ec.generate_private_key(ec.SECP384R1()),
    lambda: ec.generate_private_key(ec.SECP521R1()),
    lambda: ec.generate_private_key(ec.SECP256K1()),
    lambda: rsa.generate_private_key(65537, 2048),
    lambda: ed25519.Ed25519PrivateKey.generate(),
], ids=["P-384", "P-521", "secp256k1", "RSA", "Ed25519"])
def test_keys_of_other_curves_and_types_are_refused_as_before(
        make: Callable[[], Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    der = spki(make().public_key())
    path = pem_file(tmp_path / "other.pub", der)
    message, key = loaded(path)
    assert key is None and "not an ECDSA P-256 public key" in message
    without_libcrypto(monkeypatch)
    assert loaded(path) == (message, None)


def test_a_key_of_an_unknown_algorithm_is_refused_as_no_p256_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SubjectPublicKeyInfo naming an algorithm neither library knows (cryptography raised
    UnsupportedAlgorithm: a traceback from verify, and from mirror --key)."""
    unknown = bytes.fromhex("3059301306072a0000000000000608000000000000000003420004") \
        + b"\4" * 64
    path = pem_file(tmp_path / "unknown.pub", unknown)
    assert loaded(path) == (f"{path}: key: not an ECDSA P-256 public key", None)
    without_libcrypto(monkeypatch)
    assert loaded(path) == (f"{path}: key: not an ECDSA P-256 public key", None)


def test_without_libcrypto_cryptography_verifies_with_the_same_answers(
        signer: ec.EllipticCurvePrivateKey, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    der = spki(signer.public_key())
    path = pem_file(tmp_path / "k.pub", der)
    native = load_public_key(path)
    assert isinstance(native, LibcryptoPublicKey)
    without_libcrypto(monkeypatch)
    fallback = load_public_key(path)
    assert type(fallback) is PublicKey
    r, s = decode_dss_signature(signer.sign(b"m", ec.ECDSA(hashes.SHA256())))
    for name, mutation in MUTATIONS.items():
        signature = mutation(r, s)
        assert native.verifies(b"m", signature) is fallback.verifies(b"m", signature), name
        assert not native.verifies(b"n", signature) and not fallback.verifies(b"n", signature)
    assert native.pem() == fallback.pem() == signer.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def test_a_library_that_cannot_be_loaded_or_lacks_a_function_is_none() -> None:
    assert libcrypto.bind("libcrypto-not-here.so.3", libcrypto.functions()) is None
    assert libcrypto.bind(libcrypto.LIBRARY, {**libcrypto.functions(),
                                              "EVP_no_such_function": (None, [])}) is None
    assert libcrypto.bind(libcrypto.LIBRARY, libcrypto.functions()) is not None


@FUZZ
@given(data=st.data())
def test_hostile_points_are_refused_or_read_as_cryptography_reads_them(
        signer: ec.EllipticCurvePrivateKey, data: st.DataObject) -> None:
    """Any bytes as the point (a valid one's bit-flipped, cut or extended, or random):
    libcrypto reads a key exactly where cryptography reads an uncompressed point, the
    same key."""
    point = spki(signer.public_key())[len(P256_SPKI_PREFIX):]
    spoiled = data.draw(st.one_of(
        st.binary(max_size=100),
        st.builds(lambda tail: b"\4" + tail, st.binary(min_size=64, max_size=64)),
        st.integers(0, 8 * len(point) - 1).map(
            lambda bit: point[:bit // 8] + bytes([point[bit // 8] ^ 1 << bit % 8])
            + point[bit // 8 + 1:]),
        st.integers(0, len(point) - 1).map(lambda cut: point[:cut]),
        st.binary(min_size=1, max_size=8).map(lambda extra: point + extra)))
    native = libcrypto.p256_key(spoiled)
    try:
        reference = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), spoiled) \
            if spoiled[:1] == b"\4" else None
    except ValueError:
        reference = None
    if reference is None:
        assert native is None
    else:
        assert native is not None and native.der == spki(reference)


def test_one_key_verifies_from_many_threads_at_once(signer: ec.EllipticCurvePrivateKey
                                                    ) -> None:
    """verify checks an image's signatures and attestations side by side, in threads, with
    one key (each ctypes call lets the others run)."""
    from concurrent.futures import ThreadPoolExecutor

    native, _ = both(spki(signer.public_key()))
    signatures = [(m, signer.sign(m, ec.ECDSA(hashes.SHA256())))
                  for m in (bytes([n]) * n for n in range(32))]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda pair: (native.verifies(*pair),
                                              native.verifies(pair[0] + b".", pair[1])),
                                signatures * 8))
    assert answers == [(True, False)] * len(answers)


def test_a_python_without_ctypes_verifies_with_cryptography(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_ctypes() -> dict[str, Any]:
        raise ImportError("No module named '_ctypes'")

    monkeypatch.setattr(libcrypto, "functions", no_ctypes)
    monkeypatch.setattr(libcrypto, "_loaded", [])
    assert libcrypto.load() is None
    signer = ec.generate_private_key(ec.SECP256R1())
    key = load_public_key(pem_file(tmp_path / "k.pub", spki(signer.public_key())))
    assert type(key) is PublicKey
    assert key.verifies(b"m", signer.sign(b"m", ec.ECDSA(hashes.SHA256())))


def test_verifying_binds_no_evp_function() -> None:
    """A public key is read and verifies through OpenSSL's EC API: reading it through the
    EVP API (`d2i_PUBKEY`, whose decoder walks every provider's key managers) and
    `EVP_DigestVerify`'s set-up were 7 M of the 96 M instructions of a `verify` of one
    image. Only a signed promote's private key binds the EVP API (`signing_functions`)."""
    assert not [name for name in libcrypto.functions() if name.startswith(("EVP_", "d2i_"))]
    assert {"d2i_AutoPrivateKey", "EVP_DigestSign"} <= set(libcrypto.signing_functions())
