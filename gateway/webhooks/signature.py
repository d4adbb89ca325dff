"""The webhook signature: what the gateway sends and how a receiver checks it (pure).

Header `Livefuse-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`. The time is
signed with the body so a receiver can refuse replays of old deliveries (`verify(..., tolerance_s=)`); the
body must be checked as received, byte for byte, before it is parsed.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "Livefuse-Signature"
EVENT_HEADER = "Livefuse-Event"
DELIVERY_HEADER = "Livefuse-Delivery"


def sign(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: str, body: bytes, header: str, now: float, tolerance_s: float = 300.0) -> bool:
    """True when `header` signs `body` with `secret` and its time is within `tolerance_s` of `now`."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields.get("t", ""))
    except ValueError:
        return False
    if abs(now - timestamp) > tolerance_s:
        return False
    expected = sign(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))
