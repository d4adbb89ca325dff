"""Pictures for the quality report: faces cropped to tiles, captions, the contact sheet, webcam framing."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from engines.processors.face_detector import Face


def crop_face(image: np.ndarray, face: Face, out: int = 200) -> np.ndarray:
    x0, y0, x1, y1 = face.box
    cx, cy, side = (x0 + x1) / 2, (y0 + y1) / 2, max(x1 - x0, y1 - y0) * 1.5
    m = np.array(
        [[out / side, 0, out / 2 - cx * out / side], [0, out / side, out / 2 - cy * out / side]],
        dtype=np.float32,
    )
    return np.asarray(
        cv2.warpAffine(image, m, (out, out), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_CONSTANT)
    )


def webcam_frame(
    image: np.ndarray, box: np.ndarray, w: int = 640, h: int = 360, face_share: float = 0.4
) -> np.ndarray:
    """A w x h frame around the face at `box`, the face `face_share` of the frame's height (a webcam shot)."""
    side = float(box[3] - box[1]) / face_share
    s = h / side
    cx, cy = float(box[0] + box[2]) / 2, float(box[1] + box[3]) / 2
    m = np.array([[s, 0, w / 2 - cx * s], [0, s, h / 2 - cy * s]], dtype=np.float32)
    return np.asarray(cv2.warpAffine(image, m, (w, h), flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REPLICATE))


def caption(tile: np.ndarray, text: str) -> np.ndarray:
    band = np.full((20, tile.shape[1], 3), 255, np.uint8)
    cv2.putText(band, text, (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.42, (0, 0, 0), 1, cv2.LINE_AA)
    return np.vstack([tile, band])


def contact_sheet(rows: dict[str, tuple[np.ndarray, list[np.ndarray]]], columns: Sequence[str]) -> np.ndarray:
    """One row per case: its source tile, then `columns`' tiles (captioned tiles may be taller: padded)."""
    first = next(iter(rows.values()))
    tile = first[0].shape[1]
    header = np.full((28, tile * (len(columns) + 1), 3), 255, np.uint8)
    for c, label in enumerate(("source", *columns)):
        cv2.putText(
            header, label, (c * tile + 6, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1, cv2.LINE_AA
        )
    lines = [header]
    for source_tile, tiles in rows.values():
        height = max(t.shape[0] for t in (source_tile, *tiles))
        padded = [
            np.vstack([t, np.full((height - t.shape[0], tile, 3), 255, np.uint8)])
            for t in (source_tile, *tiles)
        ]
        lines.append(np.hstack(padded))
    return np.vstack(lines)
