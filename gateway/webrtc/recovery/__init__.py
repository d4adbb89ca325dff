"""Receive-side repair: marker-release jitter buffer (the aiortc adapter) beside its pure loss-recovery
policy."""
