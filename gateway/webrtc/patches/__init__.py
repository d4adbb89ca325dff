"""One module per aiortc (and aioice) object the extensions change; only these modules write its privates.

Each wrapper is made by `chain.wrap`, which names its layer and keeps what it wrapped (`__wrapped__`), so
`chain.layers` reads back, on a live object, which extensions sit on a method and in which order.
`gateway.webrtc.install` decides that order; the extensions only say what each layer does.
"""
