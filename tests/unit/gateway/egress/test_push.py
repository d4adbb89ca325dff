"""A push target as it is shown: its endpoint, with its path and query scrubbed."""

from __future__ import annotations

from gateway.egress.push import Target
from gateway.egress.whip_client import REFUSAL_CHARS, refusal_text


def test_a_target_shows_its_endpoint_and_scrubs_its_path_and_query() -> None:
    target = Target("https://sfu.example/whip/stream%20key?k=SECRET")
    assert target.endpoint == "https://sfu.example:443"
    text = "POST https://sfu.example/whip/stream%20key?k=SECRET failed at /whip/stream key (k=SECRET)"
    scrubbed = target.scrub(text)
    assert "stream" not in scrubbed and "SECRET" not in scrubbed and "sfu.example" not in scrubbed, scrubbed
    assert refusal_text("x" * 500 + "\nsecond line", None) == "x" * (REFUSAL_CHARS - 1) + "…"
