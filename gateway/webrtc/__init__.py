"""Everything that extends aiortc, in one place.

`compat` holds every private aiortc name and the one version check; `install` applies the extensions to a
peer connection and its senders in a fixed order. Sub-packages by concern: `congestion` (rate policies
beside their adapters), `recovery` (loss repair on receive), `codecs` (libvpx / libx264 rate changes),
`negotiation` (SDP checks and the one answer sequence), `interop` (ICE, DTLS, DSCP), `sync` (A/V clocks).
Nothing here imports the frame path (`gateway.media`) or the sessions.
"""
