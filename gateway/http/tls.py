"""HTTPS for the signalling port: a certificate the operator gives, or a throw-away self-signed one.

Why: a browser grants the camera only to a secure origin, so /demo (and any web publisher) on another
machine needs HTTPS; WHIP/WHEP clients send their bearer token in the clear without it. Media is DTLS-SRTP
either way. `--self-signed` is for development: a fresh key and certificate made at start-up for the
listening host (and localhost), which no client can verify; the CLI says so loudly. In production give
`--tls-cert/--tls-key`, or terminate TLS at a reverse proxy (README, "TLS").
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsConfig:
    cert: Path  # PEM certificate chain
    key: Path  # PEM private key
    self_signed: bool = False  # made at start-up by make_self_signed: development only


def server_context(tls: TlsConfig) -> ssl.SSLContext:
    """A server context (TLS 1.2+) loaded from the files; a bad or mismatched pair raises ValueError."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(tls.cert), str(tls.key))
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"TLS certificate {tls.cert} / key {tls.key} cannot be used: {exc}") from None
    return context


def make_self_signed(folder: Path, host: str) -> TlsConfig:
    """A new EC key and a 30-day self-signed certificate for `host`, localhost and 127.0.0.1, in `folder`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    loopback = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), loopback]
    if host not in ("", "0.0.0.0", "::", "localhost", "127.0.0.1"):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "livefuse self-signed (development only)")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / "self-signed.crt", folder / "self-signed.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return TlsConfig(cert=cert_path, key=key_path, self_signed=True)
