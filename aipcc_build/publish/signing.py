"""Sigstore signatures of released images, key-based and offline: the key files cosign and
skopeo use, the simple-signing payload containers/image verifies, and the sigstore
attachment (`sha256-<hex>.sig` beside the image) that holds them.

The private key is cosign's PEM block `ENCRYPTED SIGSTORE PRIVATE KEY` (or the older
`ENCRYPTED COSIGN PRIVATE KEY`): JSON naming the scrypt parameters and salt and the nacl
secretbox nonce, around the PKCS#8 DER of an ECDSA P-256 key. The public key is a PEM
`PUBLIC KEY`. Signatures are ECDSA P-256 over SHA-256, ASN.1 DER, as cosign makes them.

The signing is written here with `cryptography` and PyNaCl rather than run through skopeo:
Debian 12's skopeo is built with sigstore disabled; the tests check the result with a
skopeo that verifies (Debian 13's)."""

from __future__ import annotations

import time

from ..errors import InputError
from ..fsutil import NotRegularFile, open_regular
from ..functional import cache
from ..oci import b64decode, load_json
from ..records import record

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Any, Optional

PRIVATE_KEY_LABELS = ("ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY")
SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
SIGNATURE_TYPE = "cosign container image signature"
MAX_KEY_FILE = 64 * 1024
# The signatures of one digest or one DSSE envelope read at most (each a request, or an
# ECDSA verification): a registry listing thousands would hold a check for hours. A
# release's attachment holds one a signing; an envelope one or two.
MAX_SIGNATURES = 64
# The largest simple-signing payload read (ours are a few hundred bytes): the payloads of
# the MAX_SIGNATURES signatures are held at once, and a registry could serve the general
# blob bound for each.
MAX_SIGNATURE_PAYLOAD = 64 * 1024


class Signer:
    """A loaded private key: signs bytes, knows its public key. PENDING: a Future of the
    key, still being decrypted (`ready` waits for it), when KEY is None."""

    def __init__(self, key: Any, path: str, pending: Any = None) -> None:
        self._key = key
        self._pending = pending
        self.path = path
        self._public: Optional[PublicKey] = None

    def ready(self) -> Signer:
        """This signer with its key decrypted; InputError when the key cannot be."""
        if self._key is None:
            self._key = self._pending.result()
        return self

    def sign(self, data: bytes) -> bytes:
        key = self.ready()._key
        from .libcrypto import P256PrivateKey

        if isinstance(key, P256PrivateKey):
            return key.sign(data)
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        return bytes(key.sign(data, ec.ECDSA(hashes.SHA256())))

    @property
    def public_key(self) -> PublicKey:
        if self._public is None:  # asked of each manifest signed: made once
            key = self.ready()._key
            from .libcrypto import P256PrivateKey

            self._public = LibcryptoPublicKey(key.public_key(), self.path) \
                if isinstance(key, P256PrivateKey) else PublicKey(key.public_key(), self.path)
        return self._public

    def __repr__(self) -> str:  # never the key
        return f"Signer({self.path!r})"


class PublicKey:
    def __init__(self, key: Any, path: str) -> None:
        self._key = key
        self.path = path

    def verifies(self, data: bytes, signature: bytes) -> bool:
        """Whether SIGNATURE (ASN.1 DER) is this key's ECDSA signature of SHA-256(DATA)."""
        return self._verifies(data, signature)

    def _verifies(self, data: bytes, signature: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature

        try:
            self._key.verify(signature, data, _ecdsa_sha256())
        except (InvalidSignature, ValueError):
            return False
        return True

    def pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return bytes(self._key.public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo))


class LibcryptoPublicKey(PublicKey):
    """A P-256 public key verifying through libcrypto (a publish.libcrypto.P256Key)."""

    def _verifies(self, data: bytes, signature: bytes) -> bool:
        return bool(self._key.verifies(data, signature))

    def pem(self) -> bytes:
        import base64

        encoded = base64.b64encode(self._key.der)
        return b"".join([b"-----BEGIN PUBLIC KEY-----\n",
                         *(encoded[i:i + 64] + b"\n" for i in range(0, len(encoded), 64)),
                         b"-----END PUBLIC KEY-----\n"])


@cache
def _ecdsa_sha256() -> Any:
    """cryptography's ECDSA over SHA-256, for verifying, made without ECDSA's constructor:
    that loads cryptography's whole OpenSSL backend (its ciphers, RSA, `random`: a
    tenth of what a `verify` of one image runs) only to ask whether deterministic
    signing is available, which verifying never uses. The same attributes are set."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    class ForVerifying(ec.ECDSA):
        def __init__(self) -> None:  # not ECDSA's (see above)
            self._algorithm = hashes.SHA256()
            self._deterministic_signing = False

    return ForVerifying()


def _read_small(path: str, what: str, field: str) -> bytes:
    try:
        with open_regular(path) as stream:
            data = stream.read(MAX_KEY_FILE + 1)
    except NotRegularFile as exc:
        raise InputError(f"not a {what}: {exc.strerror}", file=path, field=field) from None
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror}", file=path,
                         field=field) from None
    if len(data) > MAX_KEY_FILE:
        raise InputError(f"not a {what}: larger than {MAX_KEY_FILE} bytes", file=path,
                         field=field)
    return data


def _pem_body(data: bytes, labels: tuple[str, ...]) -> Optional[bytes]:
    """The base64-decoded body of the first PEM block labelled one of LABELS."""
    text = data.decode("ascii", "replace")
    for label in labels:
        begin, end = f"-----BEGIN {label}-----", f"-----END {label}-----"
        start = text.find(begin)
        stop = text.find(end, start + len(begin)) if start >= 0 else -1
        if start >= 0 and stop >= 0:
            try:
                return b64decode("".join(text[start + len(begin):stop].split()))
            except ValueError:
                return None
    return None


def read_passphrase(path: Optional[str]) -> bytes:
    """The passphrase file's first line (without its line end); empty without a file."""
    if path is None:
        return b""
    data = _read_small(path, "passphrase file", "sign_passphrase_file")
    return data.split(b"\n", 1)[0].rstrip(b"\r")


def load_signer(key_path: str, passphrase_file: Optional[str], *,
                background: bool = False) -> Signer:
    """The private key of KEY_PATH, decrypted with the passphrase file's first line.
    InputError (one line, exit 2) for a missing, foreign or undecryptable key. BACKGROUND:
    the files are read and checked now, the key decrypted in a thread (scrypt takes a
    tenth of a second, and lets other threads run); `Signer.ready` raises its InputError."""
    import base64

    field = "sign_by_sigstore_private_key"
    data = _read_small(key_path, "private key", field)
    body = _pem_body(data, PRIVATE_KEY_LABELS)
    if body is None:
        raise InputError("not a sigstore private key (a PEM block ENCRYPTED SIGSTORE "
                         "PRIVATE KEY, as cosign and skopeo generate)", file=key_path,
                         field=field)
    try:
        sealed = load_json(body)
        kdf, cipher = sealed["kdf"], sealed["cipher"]
        params = kdf["params"]
        salt = base64.b64decode(kdf["salt"])
        nonce = base64.b64decode(cipher["nonce"])
        ciphertext = base64.b64decode(sealed["ciphertext"])
        n, r, p = int(params["N"]), int(params["r"]), int(params["p"])
        if kdf["name"] != "scrypt" or cipher["name"] != "nacl/secretbox":
            raise ValueError(f"{kdf['name']} and {cipher['name']}")
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"not a sigstore private key: its content is not cosign's "
                         f"(scrypt and nacl/secretbox): {exc}", file=key_path,
                         field=field) from None
    if not (2 <= n <= 1 << 20 and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16):
        raise InputError(f"not a sigstore private key: scrypt parameters N={n} r={r} p={p} "
                         "out of range", file=key_path, field=field)
    passphrase = read_passphrase(passphrase_file)

    def unseal() -> Any:
        # scrypt first: it lets other threads run, the imports after it do not, so the
        # plan and looks of the command run beside most of the decryption. The key is
        # then read by libcrypto where it can (cryptography's Python layer took a third as
        # long to import as scrypt takes, and the first copy waits for the key).
        secret = _scrypt(passphrase, salt, n, r, p)
        from nacl import bindings
        from nacl.exceptions import CryptoError

        try:
            der = bindings.crypto_secretbox_open(ciphertext, nonce, secret)
        except (CryptoError, ValueError, TypeError):
            raise InputError("the passphrase does not decrypt the private key (wrong "
                             "passphrase, or a damaged key file)", file=key_path,
                             field=field) from None
        from .libcrypto import p256_private_key

        native = p256_private_key(der)
        if native is not None:
            return native
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import load_der_private_key

        try:
            key = load_der_private_key(der, password=None)
        except ValueError as exc:
            raise InputError(f"the decrypted private key is not PKCS#8: {exc}",
                             file=key_path, field=field) from None
        if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
            raise InputError("the private key is not an ECDSA P-256 key", file=key_path,
                             field=field)
        return key

    if not background:
        return Signer(unseal(), key_path)
    import threading
    from concurrent.futures import Future

    pending: Future[Any] = Future()

    def run() -> None:
        try:
            pending.set_result(unseal())
        except BaseException as exc:  # handed to whoever waits: ready() raises it
            pending.set_exception(exc)

    threading.Thread(target=run, name="unseal-key", daemon=True).start()
    return Signer(None, key_path, pending)


def _scrypt(passphrase: bytes, salt: bytes, n: int, r: int, p: int) -> bytes:
    """The 32-byte scrypt key of PASSPHRASE: libsodium's (through PyNaCl), a third faster
    than OpenSSL's on the hosts measured, where PyNaCl's libsodium has it;
    cryptography's otherwise. Both let other threads run."""
    from nacl import bindings

    if bindings.has_crypto_pwhash_scryptsalsa208sha256:
        memory = 128 * r * p + 128 * r * (n + 2)  # what libsodium checks it against
        return bytes(bindings.crypto_pwhash_scryptsalsa208sha256_ll(
            passphrase, salt, n, r, p, dklen=32, maxmem=memory))
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    return bytes(Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase))


def load_public_key(path: str, field: str = "key") -> PublicKey:
    """The PEM public key of PATH; InputError when it is not an ECDSA P-256 one. A P-256
    key as cosign and skopeo write it is libcrypto's (see publish.libcrypto) where the
    system has libcrypto; any other, or without libcrypto, cryptography's."""
    data = _read_small(path, "public key", field)
    body = _pem_body(data, ("PUBLIC KEY",))
    # The P-256 key as cosign and skopeo write it, read without cryptography's
    # serialization (a quarter of what it imports).
    from .libcrypto import P256_SPKI_PREFIX, p256_key

    p256 = body is not None and len(body) == len(P256_SPKI_PREFIX) + 65 \
        and body.startswith(P256_SPKI_PREFIX)
    if body is not None and p256:
        native = p256_key(body[len(P256_SPKI_PREFIX):])
        if native is not None:
            return LibcryptoPublicKey(native, path)
    from cryptography.hazmat.primitives.asymmetric import ec

    if body is not None and p256:
        try:
            return PublicKey(ec.EllipticCurvePublicKey.from_encoded_point(
                ec.SECP256R1(), body[len(P256_SPKI_PREFIX):]), path)
        except ValueError:
            raise InputError("not an ECDSA P-256 public key: its point is not on the curve",
                             file=path, field=field) from None
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        key = load_pem_public_key(data)
    except ValueError:
        raise InputError("not a PEM public key (PUBLIC KEY, as cosign and skopeo write "
                         "it)", file=path, field=field) from None
    except UnsupportedAlgorithm:  # a key of an algorithm cryptography does not know
        raise InputError("not an ECDSA P-256 public key", file=path, field=field) from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise InputError("not an ECDSA P-256 public key", file=path, field=field)
    return PublicKey(key, path)


def write_private_key(path: str, passphrase: bytes, *, n: int = 1 << 15) -> None:
    """A new P-256 key pair in cosign's format: PATH (the encrypted private key) and
    PATH with .pub for .key (the public key). For tests and the how-to's first step where
    neither cosign nor a sigstore-enabled skopeo is at hand."""
    import base64
    import json
    import os

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
    from nacl.secret import SecretBox

    from ..fsutil import write_atomic

    key = ec.generate_private_key(ec.SECP256R1())
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    salt, nonce = os.urandom(32), os.urandom(24)
    secret = Scrypt(salt=salt, length=32, n=n, r=8, p=1).derive(passphrase)
    sealed = SecretBox(secret).encrypt(der, nonce).ciphertext
    body = json.dumps({
        "kdf": {"name": "scrypt", "params": {"N": n, "r": 8, "p": 1},
                "salt": base64.b64encode(salt).decode()},
        "cipher": {"name": "nacl/secretbox", "nonce": base64.b64encode(nonce).decode()},
        "ciphertext": base64.b64encode(sealed).decode()}).encode()
    encoded = base64.b64encode(body).decode()
    lines = [encoded[i:i + 64] for i in range(0, len(encoded), 64)]
    label = PRIVATE_KEY_LABELS[0]
    write_atomic(path, f"-----BEGIN {label}-----\n" + "\n".join(lines)
                 + f"\n-----END {label}-----\n")
    public = PublicKey(key.public_key(), path)
    stem = path[:-4] if path.endswith(".key") else path
    write_atomic(stem + ".pub", public.pem())


# ---- the simple-signing payload and the sigstore attachment ----

@record
class Payload:
    """What a signature says: the image DIGEST is DOCKER_REFERENCE (HOST/REPO:TAG)."""

    docker_reference: str
    digest: str


def payload(docker_reference: str, digest: str, creator: str) -> bytes:
    """The simple-signing payload containers/image writes and verifies."""
    import json

    return json.dumps({
        "critical": {"identity": {"docker-reference": docker_reference},
                     "image": {"docker-manifest-digest": digest},
                     "type": SIGNATURE_TYPE},
        "optional": {"creator": creator, "timestamp": int(time.time())},
    }, separators=(",", ":")).encode()


def read_payload(data: bytes) -> Optional[Payload]:
    """The identity and digest a payload claims; None when it is not one."""
    try:
        critical = load_json(data)["critical"]
        if critical["type"] != SIGNATURE_TYPE:
            return None
        return Payload(str(critical["identity"]["docker-reference"]),
                       str(critical["image"]["docker-manifest-digest"]))
    except (ValueError, KeyError, TypeError):
        return None


def signature_tag(digest: str) -> str:
    """The sigstore attachment's tag of DIGEST (cosign's scheme)."""
    algorithm, _, hexdigest = digest.partition(":")
    return f"{algorithm}-{hexdigest}.sig"
