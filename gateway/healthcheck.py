"""`python -m gateway.healthcheck`: exit 0 when this host's gateway answers /healthz, else 1 (Docker's
HEALTHCHECK). The port and scheme come from the gateway's own configuration, read the gateway's way
(gateway.cli.layering: the LIVEFUSE_CONFIG file under the LIVEFUSE_* variables), so a port or TLS set there
never leaves the check on a stale port.
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.request
from collections.abc import Mapping

from gateway.cli.layering import layered_values
from gateway.cli.option import UsageError

DEFAULT_PORT = 8080  # GatewayConfig.port, not imported: the check must not load the media stack every 15 s


def health_url(environ: Mapping[str, str]) -> str:
    values = layered_values([], environ, show_defaults=False)
    port = int(values.get("port", DEFAULT_PORT))
    tls = bool(values.get("tls_cert")) or bool(values.get("self_signed"))
    return f"{'https' if tls else 'http'}://127.0.0.1:{port}/healthz"


def main() -> int:
    try:
        url = health_url(os.environ)
    except (OSError, ValueError, UsageError) as exc:
        print(f"healthcheck: configuration: {exc}", file=sys.stderr)
        return 1
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
