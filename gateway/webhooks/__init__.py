"""Webhooks: session started/ended/degraded and egress-failed events POSTed, HMAC-signed, to configured URLs
(`gateway.webhooks.delivery`), read from the monitor's event stream so the media path never waits on them."""
