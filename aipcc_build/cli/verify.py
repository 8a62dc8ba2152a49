"""`aipcc-build verify`, and the signing options of promote: released images checked
against the key they were signed with (signatures, SBOM and verdict attestations)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

import click

from .options import authfile_option, cli, tls_verify_option

if TYPE_CHECKING:
    from ..publish.image_policy import Trust
    from ..publish.release_signing import SigningResult
    from ..publish.signing import Signer
else:
    Signer = Trust = Any


def signing_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--sign-by-sigstore-private-key and --sign-passphrase-file (skopeo's names), given to
    the command as one loaded `signer` (None without a key): a wrong passphrase or a
    foreign key file stops the command before anything is copied."""
    import functools

    @functools.wraps(command)
    def with_signer(*args: Any, sign_by_sigstore_private_key: Optional[str] = None,
                    sign_passphrase_file: Optional[str] = None, **kwargs: Any) -> Any:
        signer = None
        if sign_by_sigstore_private_key is not None:
            from ..publish.signing import load_signer

            # Decrypted while the command plans and looks; it waits before any copy.
            signer = load_signer(sign_by_sigstore_private_key, sign_passphrase_file,
                                 background=True)
        elif sign_passphrase_file is not None:
            raise click.UsageError("--sign-passphrase-file goes with "
                                   "--sign-by-sigstore-private-key")
        return command(*args, signer=signer, **kwargs)

    with_signer = click.option(
        "--require-verdict-by", type=click.Path(dir_okay=False), metavar="PUB",
        help="Refuse to promote, before any copy, an image whose platforms do not carry a "
             "verdict attestation signed by this public key that says ok.")(with_signer)
    with_signer = click.option(
        "--sign-passphrase-file", type=click.Path(dir_okay=False), metavar="FILE",
        help="The file whose first line is the private key's passphrase.")(with_signer)
    return click.option(
        "--sign-by-sigstore-private-key", type=click.Path(dir_okay=False),
        metavar="KEY",
        help="Sign every released manifest (each platform's and the index) with this "
             "cosign-format private key, as sigstore attachments, and attach the SBOM and "
             "the signed validation verdict to each platform's manifest.")(with_signer)


def trust_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """mirror's --key and --no-signatures, given to the command as one `trust`: the key
    is read before anything is copied."""
    import functools

    @functools.wraps(command)
    def with_trust(*args: Any, key: Optional[str] = None, signatures: bool = True,
                   **kwargs: Any) -> Any:
        from ..publish.image_policy import trust

        return command(*args, trust=trust(signatures, key), **kwargs)

    with_trust = click.option(
        "--signatures/--no-signatures", default=True, show_default=True,
        help="Copy each image's sigstore signatures and attestations (SBOM, verdict) with "
             "it, into a registry, a layout or an archive, and out of one.")(with_trust)
    return click.option(
        "--key", type=click.Path(dir_okay=False), metavar="PUB",
        help="The release's PEM public key: write a ClusterImagePolicy requiring "
             "signatures by it on the released repositories beside the "
             "ImageDigestMirrorSet (the source: a release manifest, or a layout or "
             "archive mirrored from one).")(with_trust)


def signed(result: Optional[SigningResult]) -> None:
    """promote's line about what it signed and attested."""
    if result is not None:
        from ..report import console

        console.note(f"signed and attested: {result.signatures} signature(s) and "
                     f"{result.attestations} attestation(s) written")


@cli.command(reads_matrix=False)
@click.argument("refs", nargs=-1, required=True, metavar="REF...")
@click.option("--key", type=click.Path(dir_okay=False), metavar="PUB",
              help="The PEM public key the release was signed with.")
@tls_verify_option("Verify registries' TLS certificates (and require HTTPS).")
@authfile_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify(refs: tuple[str, ...], key: Optional[str], tls_verify: bool,
           authfile: Optional[str], as_json: bool) -> int:
    """Check that each released image REF (HOST/REPO:TAG or HOST/REPO@DIGEST) is signed by
    the key, and that each of its platforms carries the SBOM and a verdict attestation
    bound to its digest, signed by the key and saying ok. Exit 1 naming what is wrong."""
    from ..publish.verify import VerifyRequest
    from .verify_args import run

    return run(VerifyRequest(refs=refs, key=key, tls_verify=tls_verify, authfile=authfile),
               as_json)
