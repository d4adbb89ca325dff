"""Everything that extends aiortc, in one place.

`compat` holds every private aiortc name, the one version check and the only reads and writes of that
state; `chain` is the only way a method is changed (named layers, read back from the live object); `install`
applies the extensions to a peer connection and its senders in a fixed order. Sub-packages by concern:
`congestion` (rate policies beside their adapters), `recovery` (loss repair on receive), `codecs` (libvpx /
libx264 rate changes), `negotiation` (SDP checks and the one answer sequence), `interop` (ICE, DTLS, DSCP),
`sync` (A/V clocks). Nothing here imports the frame path (`gateway.media`) or the sessions.
"""
