"""The visible disclosure label: white text on a dark band in the picture's top-left corner, sized to the
picture's height so it reads at 320x240 (OpenCV's Hershey font, already a dependency; no font files)."""

from __future__ import annotations

import av
import cv2
import numpy as np

from gateway.media.planes import plane_views

FONT = cv2.FONT_HERSHEY_SIMPLEX
TEXT_LUMA, BAND_LUMA = 235, 16


def _layout(
    text: str, height: int, width: int
) -> tuple[float, int, tuple[int, int, int, int], tuple[int, int]]:
    """Font scale, stroke, the band (x0, y0, x1, y1, even) and the text's origin."""
    scale = max(0.4, height / 240 * 0.45)
    stroke = max(1, round(height / 240))
    (tw, th), base = cv2.getTextSize(text, FONT, scale, stroke)
    pad = max(2, round(height / 80))
    x1 = min(width, pad * 2 + tw + pad) // 2 * 2
    y1 = min(height, pad * 3 + th + base) // 2 * 2
    return scale, stroke, (0, 0, x1, y1), (pad * 2, pad + th + pad // 2)


def draw_label_i420(frame: av.VideoFrame, text: str) -> None:
    """The label on a yuv420p frame's own planes (in place): neutral chroma under the band."""
    y, u, v = plane_views(frame)
    scale, stroke, (x0, y0, x1, y1), origin = _layout(text, frame.height, frame.width)
    y[y0:y1, x0:x1] = BAND_LUMA
    u[y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] = 128
    v[y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] = 128
    band = np.ascontiguousarray(y[y0:y1, x0:x1])
    cv2.putText(band, text, origin, FONT, scale, TEXT_LUMA, stroke, cv2.LINE_AA)
    y[y0:y1, x0:x1] = band


def draw_label(image: np.ndarray, text: str) -> np.ndarray:
    """The label on an RGB picture (in place; returned)."""
    height, width = image.shape[:2]
    scale, stroke, (x0, y0, x1, y1), origin = _layout(text, height, width)
    image[y0:y1, x0:x1] = BAND_LUMA
    band = np.ascontiguousarray(image[y0:y1, x0:x1])
    cv2.putText(band, text, origin, FONT, scale, (TEXT_LUMA,) * 3, stroke, cv2.LINE_AA)
    image[y0:y1, x0:x1] = band
    return image
