"""A throwaway self-signed certificate for loopback TLS stand-ins (test equipment).

The SageMaker HTTP/2 SDK's CRT transport speaks HTTP/2 only over TLS (ALPN h2), so its stand-in must serve TLS;
the client is made to trust this certificate with SSL_CERT_FILE (CRT honours it). Made with the openssl CLI at
test time, so no key ever lives in the repository.
"""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SelfSigned:
    cert: Path
    key: Path

    def server_context(self, alpn: list[str]) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        context.set_alpn_protocols(alpn)
        return context


def make_self_signed(directory: Path) -> SelfSigned:
    """A certificate valid for DNS:localhost and IP:127.0.0.1, for two days."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "standin-cert.pem", directory / "standin-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )
    return SelfSigned(cert, key)
