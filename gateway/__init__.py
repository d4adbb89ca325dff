"""livefuse gateway: WHIP/WHEP server, cross-session batching scheduler, monitoring."""
