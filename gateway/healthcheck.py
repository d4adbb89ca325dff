"""`python -m gateway.healthcheck`: exit 0 when this host's gateway answers /healthz, else 1 (Docker's
HEALTHCHECK). The port and scheme come from the same LIVEFUSE_PORT / LIVEFUSE_TLS_CERT / LIVEFUSE_SELF_SIGNED
variables the gateway reads, so a port or TLS set in the environment never leaves the check on a stale port.
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.request
from collections.abc import Mapping


def health_url(environ: Mapping[str, str]) -> str:
    port = int(environ.get("LIVEFUSE_PORT", "8080"))
    self_signed = environ.get("LIVEFUSE_SELF_SIGNED", "").strip().lower() in ("1", "true", "yes", "on")
    tls = bool(environ.get("LIVEFUSE_TLS_CERT")) or self_signed
    return f"{'https' if tls else 'http'}://127.0.0.1:{port}/healthz"


def main() -> int:
    url = health_url(os.environ)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # its own certificate, on loopback: liveness, not identity
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return 0 if response.status == 200 else 1
    except (OSError, ValueError) as exc:
        print(f"healthcheck: {url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
