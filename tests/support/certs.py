"""A test certificate authority made by openssl: a server certificate for 127.0.0.1 and an
entitlement-style client certificate with its key in a separate file."""

from __future__ import annotations

import subprocess
from pathlib import Path

ENTITLEMENT_ID = "8541735520174529121"  # subscription-manager names the files by serial


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def certificates(directory: Path) -> None:
    """In DIRECTORY (made): ca.pem; server.pem for 127.0.0.1; client.pem, a v3 client
    certificate, with client-key.pem (PKCS#1, as subscription-manager writes it)."""
    directory.mkdir()
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=aipcc test entitlement CA", cwd=directory)
    for name, subject, extensions in (
            ("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\n"
             "extendedKeyUsage=serverAuth\n"),
            ("client", f"/CN={ENTITLEMENT_ID}", "extendedKeyUsage=clientAuth\n"
             "keyUsage=digitalSignature,keyEncipherment\n")):
        openssl("genrsa", "-traditional", "-out", f"{name}-key.pem", "2048", cwd=directory)
        openssl("req", "-new", "-key", f"{name}-key.pem", "-out", f"{name}.csr", "-subj",
                subject, cwd=directory)
        (directory / f"{name}.ext").write_text(extensions)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out",
                f"{name}.pem", cwd=directory)
