"""ECDSA P-256 signatures over SHA-256 verified by the system's OpenSSL libcrypto (3.x),
called through ctypes: what `verify` checks a release's signatures with. Importing
cryptography's Python layer (which binds the same OpenSSL code) costs more than the rest
of a check of one image's own code; ctypes and libcrypto, two thirds of that.

A key is verified with through OpenSSL's EC API: an EC_KEY of the P-256 group
(`EC_KEY_new_by_curve_name`), its point read by `o2i_ECPublicKey` (which refuses a point
off the curve), and each signature checked by `ECDSA_verify` over the SHA-256 of the data
(the DER signature parsed, and re-encoded to refuse any other encoding, by OpenSSL as for
cryptography): the function OpenSSL's EVP API ends in for an EC key, without what reading
a key through the EVP API costs first (`d2i_PUBKEY`'s decoder machinery walks every key
manager of every provider: 7 M of the 96 M instructions of a `verify` of one image).
These calls are deprecated in OpenSSL 3 and still in every libcrypto.so.3; a build
without them fails `load`, and cryptography verifies. A private key (a signed promote)
is read and signs through the EVP API (`d2i_AutoPrivateKey`, `EVP_DigestSign`).

Every pointer is a `c_void_p`, every function has its argument and result types set,
everything allocated is freed. `load` is None where ctypes is missing or libcrypto.so.3
cannot be loaded or lacks a function: the caller then verifies with cryptography. The
library is named by its soname, never looked for with `ctypes.util.find_library` (which
runs ldconfig or a compiler). ctypes is imported when libcrypto is first asked for, not
with this module."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    from typing import Any, Optional

LIBRARY = "libcrypto.so.3"
NID_P256 = 415  # NID_X9_62_prime256v1: the P-256 group
EVP_PKEY_EC = 408  # NID_X9_62_id_ecPublicKey: an EC key's type
P256 = b"prime256v1"  # OpenSSL's name of the group (secp256r1, NIST P-256)
# The DER SubjectPublicKeyInfo of an ECDSA P-256 key before its point (65 bytes,
# uncompressed: 04 X Y), as cosign and skopeo write it: the only form read here (the
# point alone goes to libcrypto).
P256_SPKI_PREFIX = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200")


def functions() -> dict[str, tuple[Any, list[Any]]]:
    """Each function a public key is read and verifies with: (result type, argument
    types), as OpenSSL 3's headers declare them. ImportError without ctypes."""
    import ctypes

    pointer = ctypes.c_void_p
    return {
        "EC_KEY_new_by_curve_name": (pointer, [ctypes.c_int]),
        "o2i_ECPublicKey": (pointer, [ctypes.POINTER(pointer), ctypes.POINTER(ctypes.c_char_p),
                                      ctypes.c_long]),
        "EC_KEY_free": (None, [pointer]),
        "ECDSA_verify": (ctypes.c_int, [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                        ctypes.c_char_p, ctypes.c_int, pointer]),
        "ERR_clear_error": (None, []),
    }


def bind(library: str, table: dict[str, tuple[Any, list[Any]]]) -> Optional[Any]:
    """LIBRARY loaded with each function of TABLE typed; None when it cannot be loaded or
    lacks one of them."""
    import ctypes

    try:
        lib = ctypes.CDLL(library)
        for name, (result, arguments) in table.items():
            function = getattr(lib, name)
            function.restype, function.argtypes = result, arguments
    except (OSError, AttributeError):
        return None
    return lib


_loaded: list[Optional[Any]] = []


def load() -> Optional[Any]:
    """The system's libcrypto, its functions typed (loaded once); None without it."""
    if not _loaded:
        try:
            table = functions()
        except ImportError:  # a Python built without ctypes
            _loaded.append(None)
        else:
            _loaded.append(bind(LIBRARY, table))
    return _loaded[0]


class P256Key:
    """An ECDSA P-256 public key held by libcrypto (an EC_KEY, freed with this object)."""

    def __init__(self, lib: Any, key: int, der: bytes) -> None:
        self._lib = lib  # kept for __del__, whatever the module holds by then
        self._key = key
        self.der = der  # its SubjectPublicKeyInfo

    def verifies(self, data: bytes, signature: bytes) -> bool:
        """Whether SIGNATURE (ASN.1 DER) is this key's ECDSA signature of SHA-256(DATA)."""
        from ..digest import hexdigest

        digest = bytes.fromhex(str(hexdigest("sha256", data)))
        try:
            return self._lib.ECDSA_verify(0, digest, len(digest), signature, len(signature),
                                          self._key) == 1
        finally:
            self._lib.ERR_clear_error()  # a refused signature leaves OpenSSL's reasons queued

    def __del__(self) -> None:
        self._lib.EC_KEY_free(self._key)


def p256_key(point: bytes) -> Optional[P256Key]:
    """The ECDSA P-256 key of POINT (65 bytes, uncompressed: 04 X Y); None without
    libcrypto, or when POINT is no such point on the curve."""
    lib = load()
    if lib is None or len(point) != 65 or point[0] != 4:
        return None
    import ctypes

    made = lib.EC_KEY_new_by_curve_name(NID_P256)
    if not made:
        lib.ERR_clear_error()
        return None
    key = P256Key(lib, made, P256_SPKI_PREFIX + point)  # from here on, freed with KEY
    cursor = ctypes.c_char_p(point)
    if not lib.o2i_ECPublicKey(ctypes.byref(ctypes.c_void_p(made)), ctypes.byref(cursor),
                               len(point)):
        lib.ERR_clear_error()
        return None
    return key


def signing_functions() -> dict[str, tuple[Any, list[Any]]]:
    """The functions a P-256 private key is read and signs with (OpenSSL's EVP API),
    beside `functions`'s (its public key is read back as a key file is): a table of its
    own, so that `verify` binds none of them. ImportError without ctypes."""
    import ctypes

    pointer = ctypes.c_void_p
    return {
        **functions(),
        "d2i_AutoPrivateKey": (pointer, [pointer, ctypes.POINTER(ctypes.c_char_p),
                                         ctypes.c_long]),
        "i2d_PUBKEY": (ctypes.c_int, [pointer, ctypes.POINTER(ctypes.c_char_p)]),
        "EVP_PKEY_get_base_id": (ctypes.c_int, [pointer]),
        "EVP_PKEY_get_group_name": (ctypes.c_int, [pointer, ctypes.c_char_p, ctypes.c_size_t,
                                                   ctypes.POINTER(ctypes.c_size_t)]),
        "EVP_PKEY_free": (None, [pointer]),
        "EVP_MD_CTX_new": (pointer, []),
        "EVP_MD_CTX_free": (None, [pointer]),
        "EVP_sha256": (pointer, []),
        "EVP_DigestSignInit": (ctypes.c_int, [pointer] * 5),
        "EVP_DigestSign": (ctypes.c_int, [pointer, ctypes.c_char_p,
                                          ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p,
                                          ctypes.c_size_t]),
    }


_signing: list[Optional[Any]] = []


def load_signing() -> Optional[Any]:
    """libcrypto with `signing_functions` typed (loaded once); None without it."""
    if not _signing:
        try:
            table = signing_functions()
        except ImportError:
            _signing.append(None)
        else:
            _signing.append(bind(LIBRARY, table))
    return _signing[0]


class P256PrivateKey:
    """An ECDSA P-256 private key held by libcrypto (an EVP_PKEY, freed with this object):
    what a signed promote signs with, without importing cryptography's Python layer (a
    third of the time the key's scrypt takes, holding the interpreter while promote plans
    and looks: its copies wait for the key)."""

    def __init__(self, lib: Any, pkey: int) -> None:
        self._lib = lib
        self._pkey = pkey

    def sign(self, data: bytes) -> bytes:
        """The ECDSA signature (ASN.1 DER) of SHA-256(DATA); RuntimeError should libcrypto
        fail (it does not with a key it read)."""
        import ctypes

        lib = self._lib
        context = lib.EVP_MD_CTX_new()
        if not context:
            raise RuntimeError("libcrypto: no digest context")
        try:
            size = ctypes.c_size_t(0)
            if lib.EVP_DigestSignInit(context, None, lib.EVP_sha256(), None,
                                      self._pkey) != 1 \
                    or lib.EVP_DigestSign(context, None, ctypes.byref(size), data,
                                          len(data)) != 1:
                raise RuntimeError("libcrypto: ECDSA signing failed")
            signature = ctypes.create_string_buffer(size.value)
            if lib.EVP_DigestSign(context, signature, ctypes.byref(size), data,
                                  len(data)) != 1:
                raise RuntimeError("libcrypto: ECDSA signing failed")
            return signature.raw[:size.value]
        finally:
            lib.EVP_MD_CTX_free(context)
            lib.ERR_clear_error()

    def public_key(self) -> Optional[P256Key]:
        """Its public key (read back from its SubjectPublicKeyInfo, as a key file is)."""
        import ctypes

        lib = self._lib
        size = lib.i2d_PUBKEY(self._pkey, None)
        if size != len(P256_SPKI_PREFIX) + 65:
            lib.ERR_clear_error()
            return None
        buffer = ctypes.create_string_buffer(size)
        cursor = ctypes.c_char_p(ctypes.addressof(buffer))
        if lib.i2d_PUBKEY(self._pkey, ctypes.byref(cursor)) != size:
            lib.ERR_clear_error()
            return None
        der = buffer.raw
        return p256_key(der[len(P256_SPKI_PREFIX):]) \
            if der.startswith(P256_SPKI_PREFIX) else None

    def __del__(self) -> None:
        self._lib.EVP_PKEY_free(self._pkey)


def p256_private_key(der: bytes) -> Optional[P256PrivateKey]:
    """The ECDSA P-256 private key of DER (PKCS#8, or another form OpenSSL reads, as
    cryptography's reading takes); None without libcrypto, or when DER is no P-256 key:
    the caller reads it with cryptography then, whose refusal names what it is."""
    lib = load_signing()
    if lib is None:
        return None
    import ctypes

    cursor = ctypes.c_char_p(der)
    pkey = lib.d2i_AutoPrivateKey(None, ctypes.byref(cursor), len(der))
    if not pkey:
        lib.ERR_clear_error()
        return None
    key = P256PrivateKey(lib, pkey)  # from here on, freed with KEY
    name = ctypes.create_string_buffer(64)
    size = ctypes.c_size_t(0)
    if lib.EVP_PKEY_get_base_id(pkey) != EVP_PKEY_EC \
            or lib.EVP_PKEY_get_group_name(pkey, name, len(name), ctypes.byref(size)) != 1 \
            or name.value != P256 or key.public_key() is None:
        lib.ERR_clear_error()
        return None
    return key
