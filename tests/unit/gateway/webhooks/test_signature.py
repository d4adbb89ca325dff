"""The webhook signature a receiver checks: the same body, secret and a recent time, nothing else."""

from __future__ import annotations

from gateway.webhooks.signature import sign, verify


def test_signature_verifies_only_the_same_body_secret_and_a_recent_time() -> None:
    body = b'{"event":"session.started"}'
    header = sign("s3cret", body, 1_700_000_000)
    assert header.startswith("t=1700000000,v1=") and len(header.split("v1=")[1]) == 64
    assert verify("s3cret", body, header, now=1_700_000_010)
    assert not verify("s3cret", body + b" ", header, now=1_700_000_010)
    assert not verify("other", body, header, now=1_700_000_010)
    assert not verify("s3cret", body, header, now=1_700_001_000)  # a replay, 1000 s later
    assert not verify("s3cret", body, "garbage", now=1_700_000_000)
    assert not verify("s3cret", body, "t=x,v1=00", now=1_700_000_000)
