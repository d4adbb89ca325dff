"""`shading`'s per-face step on a torch device: the target's low frequencies on the warped source.

`relight` is `shading.relight` step by step (tests/unit/engines/processors/test_shading.py holds the
two together on CPU torch): the skin weight, the shrunk copy (area), the blur, the ratio and its bilinear
stretch back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engines.processors import tensor_ops as T
from engines.processors.masks import FEATURE_GROW, FEATURES
from engines.processors.shading import (
    CHROMA_DETAIL,
    CHROMA_FLOOR,
    CHROMA_GAIN,
    DETAIL,
    EDGE_SIGMA,
    GRAIN_SIGMA,
    LIGHT_SIGMA,
    MID_SIGMA,
    PRIOR,
    work_scale,
)


def skin_weight(h: int, w: int, landmarks: np.ndarray, face_size: float, device: Any) -> Any:
    """masks.skin_weight on the device: (h, w) bool, True off the lips, eyes and brows (grown)."""
    import torch

    rings = [landmarks[list(r)] for r in FEATURES]
    filled = T.polygons_mask(h, w, rings, device).to(torch.float32)[None, None]
    grown = T.dilate(filled, max(1, int(round(face_size * FEATURE_GROW))))
    return grown[0, 0] < 0.5


def edge_shading(detail: Any, weight: Any, paste: Any, face_size: float) -> Any:
    """shading.edge_shading on the device: (h, w) float each -> (h, w) float."""
    import torch

    h, w = weight.shape
    k = work_scale(face_size, EDGE_SIGMA)
    stack = _shrunk(torch.stack([detail * weight, weight, paste.float()])[None], k)
    both = T.gaussian_blur(stack[:, :2], face_size * MID_SIGMA / k)[0]
    mid = both[0] / both[1].clamp(min=1e-3)
    whole = T.gaussian_blur(stack[:, 2:], face_size * EDGE_SIGMA / k)[0, 0]
    return _stretched((mid * (1.0 - (whole * 2.0 - 1.0).clamp(0.0, 1.0)))[None, None], k, h, w)[0, 0]


def _shrunk(x: Any, k: int) -> Any:
    """shading.shrunk on the device, for (1, C, h, w)."""
    import torch.nn.functional as F

    if k == 1:
        return x
    h, w = x.shape[-2:]
    return F.avg_pool2d(F.pad(x, (0, (-w) % k, 0, (-h) % k)), k)


def _stretched(x: Any, k: int, h: int, w: int) -> Any:
    """shading.stretched on the device, for (1, C, hs, ws)."""
    import torch.nn.functional as F

    if k == 1:
        return x
    hs, ws = x.shape[-2:]
    return F.interpolate(x, size=(hs * k, ws * k), mode="bilinear", align_corners=False)[:, :, :h, :w]


def relight(warped: Any, target: Any, skin: Any, face_size: float, paste: Any = None) -> Any:
    """shading.relight on the device: (h, w, 3) float and uint8 RGB, an (h, w) bool, the paste's (h, w)
    float mask or None -> (h, w, 3) float."""
    if float(skin.sum()) < 16.0:
        return warped.float()
    return relight_lab(T.rgb_to_lab(warped.float() / 255.0), target, skin, face_size, paste)


def relight_lab(w_lab: Any, target: Any, skin: Any, face_size: float, paste: Any = None) -> Any:
    """shading.relight_lab on the device: the warped source in float L*a*b* (h, w, 3), the rest as
    `relight` -> (h, w, 3) float RGB 0..255."""
    import torch

    h, w = skin.shape
    weight = skin.to(torch.float32)
    total = float(weight.sum())
    if total < 16.0:
        return T.lab_to_rgb(w_lab) * 255.0
    t_lab = T.rgb_to_lab(target.float() / 255.0)
    k = work_scale(face_size)
    wf = weight[:, :, None]
    stack = torch.cat([t_lab * wf, wf, w_lab * wf], dim=2).permute(2, 0, 1)[None]
    means = stack[0, [0, 1, 2, 4, 5, 6]].reshape(6, -1).sum(1) / total
    small = T.gaussian_blur(_shrunk(stack, k), face_size * LIGHT_SIGMA / k)[0]
    sel = skin.bool()
    t_std = t_lab[sel].double().std(0, unbiased=False).float()
    w_std = w_lab[sel].double().std(0, unbiased=False).float()
    detail = (t_std + 1e-3) / (w_std + 1e-3)
    detail = torch.cat([detail[:1].clamp(*DETAIL), detail[1:].clamp(*CHROMA_DETAIL)])
    local = (small[[0, 1, 2, 4, 5, 6]] + PRIOR * means[:, None, None]) / (small[3:4] + PRIOR)
    # the detail's per-pixel scale on the cells, as on the host: lightness's, then a*'s and b*'s by the
    # skins' chroma ratio (`shading.chroma_gain`)
    gain = (torch.sqrt(local[1] ** 2 + local[2] ** 2) + CHROMA_FLOOR) / (
        torch.sqrt(local[4] ** 2 + local[5] ** 2) + CHROMA_FLOOR
    )
    gain = gain.clamp(*CHROMA_GAIN)
    planes = torch.cat([local, torch.stack([torch.full_like(gain, 1.0), gain, gain]) * detail[:, None, None]])
    planes = _stretched(planes[None], k, h, w)[0]
    t_low, s_low, scale = (planes[c : c + 3].permute(1, 2, 0) for c in (0, 3, 6))
    if paste is not None:  # the source's own shading faded out toward the paste's edge
        fade = edge_shading(w_lab[:, :, 0] - s_low[:, :, 0], weight, paste, face_size)
        w_lab = torch.cat([(w_lab[:, :, 0] - fade)[:, :, None], w_lab[:, :, 1:]], 2)
    out = (w_lab - s_low) * scale + t_low
    # the lightness detail finer than grain at most at its own contrast, as on the host: L is the coarse
    # detail at the ratio plus the grain at min(ratio, 1) (the same as the host's branch on either side of 1)
    light = w_lab[:, :, 0] - s_low[:, :, 0]
    coarse = T.gaussian_blur(light[None, None], max(0.5, GRAIN_SIGMA * face_size))[0, 0]
    grain = (light - coarse) * detail[0].clamp(max=1.0)
    out = torch.cat([(coarse * detail[0] + grain + t_low[:, :, 0])[:, :, None], out[:, :, 1:]], 2)
    return T.lab_to_rgb(out) * 255.0
