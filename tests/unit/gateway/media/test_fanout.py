"""FanoutEncoder's ceiling by picture size (`fit_size`) and what the encoder then runs at."""

from __future__ import annotations

import numpy as np

from gateway.media.fanout import FanoutEncoder


def _encode(enc: FanoutEncoder, size: tuple[int, int], frames: int = 3) -> int:
    """Encode a few frames of `size` as the session does (fit_size on the loop, then encode); bytes out."""
    h, w = size
    total = 0
    for i in range(frames):
        enc.fit_size(w, h)
        img = np.full((h, w, 3), 40 + 10 * i, np.uint8)
        total += sum(p.size for p in enc.encode(img, (i + 1) * 6000))
    return total


def test_an_automatic_ceiling_follows_the_picture_and_the_encoder_follows_it() -> None:
    enc = FanoutEncoder(bitrate=None)
    enc.subscribe()
    enc.bitrate.add("viewer")  # a receiver that has not reported yet: the start fraction of the class
    enc.fit_size(640, 360)
    assert enc.bitrate.config.max_bps == 1_700_000 and enc.bitrate.current_bps == 500_000  # start capped
    enc.fit_size(320, 240)  # the publisher dropped its resolution: a smaller class
    assert enc.bitrate.config.max_bps == 1_000_000 and enc.bitrate.current_bps == 500_000
    assert _encode(enc, (240, 320)) > 0 and enc.encoding_bps == 500_000  # the context runs at it
    enc.bitrate.on_loss("viewer", 0.4, now=1.0)  # the link showed loss: 500 -> 400 kbit/s
    enc._retarget(1.0)
    _encode(enc, (720, 1280))  # a bigger picture: a higher ceiling, but no jump over what the link showed
    assert enc.bitrate.config.max_bps == 2_500_000 and enc.encoding_bps == 400_000
    assert enc.bitrate.snapshot(0.0)["ceiling_bps"] == 2_500_000  # what GET /sessions shows


def test_an_explicit_bitrate_is_not_moved_by_the_picture() -> None:
    enc = FanoutEncoder(bitrate=800_000)
    assert enc.encoding_bps is None  # nothing open before the first frame
    _encode(enc, (1080, 1920), frames=1)
    assert enc.bitrate.config.max_bps == 800_000 and enc.encoding_bps == 800_000
