"""The per-face image work as torch tensor ops: one implementation for CPU torch and for CUDA.

Why: at 720p most of a frame's CPU time is image work around the models (mesh_warp's rasterisation and
remap, the enhancer's blurs, masks, colour matching, paste, RGB -> I420), not inference; on a GPU it belongs
on the device beside the models, with the frame uploaded once and downloaded once per batch. Each function
mirrors one numpy/OpenCV function of the processors (same arguments, same conventions: pixel centres at
integer coordinates, OpenCV's Gaussian kernel sizes and borders, BT.601 limited range) and
tests/unit/engines/processors/test_tensor_ops.py holds each to that function within a stated bound.
Crops and paste-backs of equal-size patches run as one batch (affine grids + `grid_sample`); masks and blurs
are convolutions. Host-side constants (a structuring element, a triangulation) are computed once and moved to
the device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from engines.processors.face_shape import triangle_depths
from engines.processors.mesh_warp import EDGE_TOL
from engines.source.mesh import MeshSource


def _torch() -> Any:
    import torch

    return torch


# -- filters ------------------------------------------------------------------------------------------------


def gaussian_kernel(sigma: float, depth_float: bool = True) -> np.ndarray:
    """OpenCV's kernel for GaussianBlur(ksize=(0, 0), sigma): size round(sigma * (4 | 3) * 2 + 1) | 1."""
    k = int(round(sigma * (4 if depth_float else 3) * 2 + 1)) | 1
    x = np.arange(k, dtype=np.float64) - (k - 1) / 2
    g = np.exp(-(x * x) / (2 * sigma * sigma))
    return (g / g.sum()).astype(np.float32)


def gaussian_blur(x: Any, sigma: float) -> Any:
    """(N, C, H, W) float, separable, BORDER_REFLECT_101 as cv2.GaussianBlur's default."""
    torch = _torch()
    import torch.nn.functional as F

    k = torch.from_numpy(gaussian_kernel(sigma)).to(x.device, x.dtype).view(1, 1, -1)
    r = (k.numel() - 1) // 2
    n, c, h, w = x.shape
    # rows, then columns, each as a 1-D convolution over every line at once (half the time of conv2d with a
    # 1xK kernel on CPU torch)
    y = _pad_reflect101(x.reshape(n * c, 1, h, w), (r, r, 0, 0)).reshape(-1, 1, w + 2 * r)
    y = F.conv1d(y, k).reshape(n * c, 1, h, w).transpose(2, 3)
    y = _pad_reflect101(y, (r, r, 0, 0)).reshape(-1, 1, h + 2 * r)
    return F.conv1d(y, k).reshape(n * c, 1, w, h).transpose(2, 3).reshape(n, c, h, w)


def _pad_reflect101(x: Any, pad: tuple[int, int, int, int]) -> Any:
    """F.pad 'reflect' is OpenCV's REFLECT_101 but needs pad < size; wider pads reflect repeatedly."""
    import torch.nn.functional as F

    left, right, top, bottom = pad
    while left or right or top or bottom:
        h, w = x.shape[-2:]
        step = (min(left, w - 1), min(right, w - 1), min(top, h - 1), min(bottom, h - 1))
        if not any(step):  # a 1-pixel dim: reflection repeats that pixel
            return F.pad(x, (left, right, top, bottom), mode="replicate")
        x = F.pad(x, step, mode="reflect")
        left, right, top, bottom = (a - b for a, b in zip((left, right, top, bottom), step, strict=True))
    return x


def ellipse_element(radius: int) -> np.ndarray:
    import cv2

    return np.asarray(
        cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1)), dtype=np.float32
    )


def erode(mask: Any, radius: int) -> Any:
    """Binary (N, 1, H, W) {0, 1} eroded by an ellipse (cv2.erode: pixels outside the image never erode)."""
    return 1.0 - dilate(1.0 - mask, radius, outside=0.0)


def dilate(mask: Any, radius: int, outside: float = 0.0) -> Any:
    """Binary (N, 1, H, W) {0, 1} dilated by an ellipse (outside the image counts as `outside`)."""
    torch = _torch()
    import torch.nn.functional as F

    if radius <= 0:
        return mask
    k = torch.from_numpy(ellipse_element(radius)).to(mask.device, mask.dtype)[None, None]
    padded = F.pad(mask, (radius,) * 4, value=outside)
    return (F.conv2d(padded, k) > 0.5).to(mask.dtype)


def polygon_mask(h: int, w: int, polygon: np.ndarray, device: Any) -> Any:
    """(h, w) float {0, 1}: pixel centres inside a convex polygon (either winding), as cv2.fillConvexPoly."""
    torch = _torch()
    pts = np.asarray(polygon, dtype=np.float64)
    if pts.shape[0] < 3:
        return torch.zeros((h, w), dtype=torch.float32, device=device)
    ys = torch.arange(h, device=device, dtype=torch.float32)[:, None]
    xs = torch.arange(w, device=device, dtype=torch.float32)[None, :]
    pos = torch.ones((h, w), dtype=torch.bool, device=device)
    neg = torch.ones((h, w), dtype=torch.bool, device=device)
    for (ax, ay), (bx, by) in zip(pts, np.roll(pts, -1, 0), strict=True):  # one half-plane per edge
        dx, dy = float(bx - ax), float(by - ay)
        cross = (ys - float(ay)) * dx - (xs - float(ax)) * dy
        tol = 0.5 * float(np.hypot(dx, dy))  # half a pixel, as the 8-connected fill
        pos &= cross >= -tol
        neg &= cross <= tol
    return (pos | neg).to(torch.float32)


def polygons_mask(h: int, w: int, polygons: Sequence[np.ndarray], device: Any) -> Any:
    """(h, w) bool: pixel centres inside any of the (possibly concave) polygons, by crossing parity, as
    cv2.fillPoly for non-overlapping rings (the lips, the eyes)."""
    torch = _torch()
    ys = torch.arange(h, device=device, dtype=torch.float32)[:, None]
    xs = torch.arange(w, device=device, dtype=torch.float32)[None, :]
    out = torch.zeros((h, w), dtype=torch.bool, device=device)
    for poly in polygons:
        pts = np.asarray(poly, dtype=np.float64)
        inside = torch.zeros((h, w), dtype=torch.bool, device=device)
        for (ax, ay), (bx, by) in zip(pts, np.roll(pts, -1, 0), strict=True):
            if ay == by:
                continue
            spans = (ys >= min(ay, by)) & (ys < max(ay, by))  # (h, 1): rows this edge crosses
            x_at = float(ax) + (ys - float(ay)) * float((bx - ax) / (by - ay))
            inside ^= spans & (xs <= x_at)
        out |= inside
    return out


def region_mask(
    h: int, w: int, landmarks: np.ndarray, regions: Sequence[str], face_size: float, device: Any
) -> Any:
    """masks.region_mask on the device: 1 where the target's `regions` (mouth, eyes) are kept."""
    torch = _torch()
    from engines.processors.masks import FEATHER, region_grow, region_rings

    out = torch.zeros((1, 1, h, w), dtype=torch.float32, device=device)
    for region in regions:  # each region grown (or shrunk) and feathered on its own, as the numpy twin
        rings = region_rings(landmarks, region)
        filled = polygons_mask(h, w, rings, device).to(torch.float32)[None, None]
        grow = region_grow(landmarks, region, face_size)
        if grow > 0:
            filled = dilate(filled, grow)
        elif grow < 0:
            filled = erode(filled, -grow)
        out = torch.maximum(out, gaussian_blur(filled, max(0.5, face_size * FEATHER[region])))
    return out[0, 0]


def feather(region: Any, erode_px: int, blur: float) -> Any:
    """(h, w) {0, 1} region -> float mask in [0, 1]: eroded, then blurred (paste.feather)."""
    m = region.to(_torch().float32)[None, None]
    if erode_px > 0:
        m = erode(m, erode_px)
    if blur > 0:
        m = gaussian_blur(m, blur)
    return m[0, 0]


def feathered_polygon_mask(
    h: int, w: int, polygon: np.ndarray, erode_px: int, blur: float, device: Any
) -> Any:
    return feather(polygon_mask(h, w, polygon, device), erode_px, blur)


# -- geometry -----------------------------------------------------------------------------------------------


def sample(images: Any, src_x: Any, src_y: Any, border: str = "border") -> Any:
    """Bilinear sample of (N, C, H, W) images at absolute source coordinates (N, h, w) (pixel centres at
    integers, as cv2.remap/warpAffine); `border`: "border" = REPLICATE, "zeros" = CONSTANT 0."""
    import torch.nn.functional as F

    h, w = images.shape[-2:]
    gx = src_x * (2.0 / max(w - 1, 1)) - 1.0
    gy = src_y * (2.0 / max(h - 1, 1)) - 1.0
    grid = _torch().stack([gx, gy], dim=-1).to(images.dtype)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode=border, align_corners=True)


def affine_sources(matrices: Any, h: int, w: int) -> tuple[Any, Any]:
    """For (N, 2, 3) dst -> src affines, the source point of every (h, w) output pixel: two (N, h, w)."""
    torch = _torch()
    m = matrices.to(torch.float64)
    ys = torch.arange(h, device=m.device, dtype=torch.float64)[None, :, None]
    xs = torch.arange(w, device=m.device, dtype=torch.float64)[None, None, :]
    sx = m[:, 0, 0, None, None] * xs + m[:, 0, 1, None, None] * ys + m[:, 0, 2, None, None]
    sy = m[:, 1, 0, None, None] * xs + m[:, 1, 1, None, None] * ys + m[:, 1, 2, None, None]
    return sx, sy


def invert_affines(matrices: np.ndarray) -> np.ndarray:
    """(N, 2, 3) -> their inverses (float64)."""
    m = np.asarray(matrices, dtype=np.float64)
    a, b, c, d = m[:, 0, 0], m[:, 0, 1], m[:, 1, 0], m[:, 1, 1]
    det = a * d - b * c
    inv = np.empty_like(m)
    inv[:, 0, 0], inv[:, 0, 1], inv[:, 1, 0], inv[:, 1, 1] = d / det, -b / det, -c / det, a / det
    inv[:, :, 2] = -np.einsum("nij,nj->ni", inv[:, :, :2], m[:, :, 2])
    return inv


def affine_crops(frames: Any, index: Sequence[int], matrices: np.ndarray, size: int) -> Any:
    """Aligned `size` crops, one per (frame index, frame -> crop affine): (N, C, size, size) float, borders
    replicated (alignment.warp_crop for a whole batch in one grid_sample). `frames`: (F, C, H, W) float."""
    torch = _torch()
    inv = torch.as_tensor(invert_affines(matrices), device=frames.device)
    sx, sy = affine_sources(inv, size, size)
    src = frames[torch.as_tensor(list(index), device=frames.device, dtype=torch.long)]
    return sample(src, sx, sy)


def frame_crops(frame: Any, matrices: np.ndarray, size: int) -> Any:
    """`affine_crops` of one (H, W, 3) uint8 frame, reading only the frame box the crops sample (its float
    copy is the faces' neighbourhood, not the whole frame). Equal to cropping the whole frame: replicated
    borders clamp to the frame's edge, and that edge lies inside the box whenever a sample reaches past it."""
    fh, fw = frame.shape[:2]
    m = np.asarray(matrices, dtype=np.float64)
    inv = invert_affines(m)
    corners = np.array([[0.0, 0.0], [size - 1.0, 0.0], [0.0, size - 1.0], [size - 1.0, size - 1.0]])
    pts = np.einsum("nij,kj->nki", inv[:, :, :2], corners) + inv[:, None, :, 2]
    lo, hi = pts.reshape(-1, 2).min(0), pts.reshape(-1, 2).max(0)
    x0, y0 = int(np.clip(np.floor(lo[0]), 0, fw - 1)), int(np.clip(np.floor(lo[1]), 0, fh - 1))
    x1, y1 = int(np.clip(np.ceil(hi[0]) + 1, x0 + 1, fw)), int(np.clip(np.ceil(hi[1]) + 1, y0 + 1, fh))
    shifted = m.copy()  # box pixel (x, y) is frame pixel (x + x0, y + y0)
    shifted[:, :, 2] += np.einsum("nij,j->ni", m[:, :, :2], np.array([x0, y0], dtype=np.float64))
    region = frame[y0:y1, x0:x1].permute(2, 0, 1)[None].float()
    return affine_crops(region, [0] * len(m), shifted, size)


def blend(region: Any, image: Any, alpha: Any) -> None:
    """`region` ((h, w, 3) uint8, in place) += (image - region) * alpha, rounded half up as paste.paste_back
    (`image` (h, w, 3) float 0..255, `alpha` (h, w) float, clipped to [0, 1])."""
    r = region.float()
    blended = (image - r) * alpha.clamp(0.0, 1.0)[:, :, None] + r + 0.5
    region.copy_(blended.clamp(0.5, 255.5).to(_torch().uint8))


def resize_linear(x: Any, size: int) -> Any:
    """(N, C, h, w) float -> (N, C, size, size), as cv2.resize INTER_LINEAR (half-pixel centres)."""
    import torch.nn.functional as F

    return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)


# -- mesh warp ----------------------------------------------------------------------------------------------


def warp_maps(
    local: np.ndarray, source: MeshSource, h: int, w: int, device: Any
) -> tuple[Any, Any, Any] | None:
    """mesh_warp.warp_maps on the device: (map_x, map_y, covered) for an (h, w) box whose target mesh is
    `local`, -1 where no visible triangle covers a pixel; None when none does. The same row-span
    rasterisation (every visible triangle's rows at once, spans from its edge functions grown by EDGE_TOL,
    each pixel's source point from its triangle's affine map); where triangles overlap, the nearest wins
    (drawn far to near as on the host; a max-scatter of the drawing position, so write order does not
    matter)."""
    torch = _torch()
    f64 = torch.float64
    triangles = torch.as_tensor(source.triangles, device=device, dtype=torch.long)
    tris_dst = torch.as_tensor(local, device=device, dtype=f64)[triangles]
    a, b, c = tris_dst[:, 0], tris_dst[:, 1], tris_dst[:, 2]
    area = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    orient = torch.as_tensor(source.orientation, device=device, dtype=f64)
    vis = torch.nonzero((torch.sign(area) == orient) & (area.abs() > 1.0))[:, 0]
    if vis.numel() == 0:
        return None
    if source.shape is not None:  # far first, as on the host: the nearest triangle wins
        depth = torch.as_tensor(triangle_depths(source.shape, local, source.triangles), device=device)
        vis = vis[torch.argsort(-depth[vis], stable=True)]
    d, det = tris_dst[vis], area[vis]
    a, b, c = d[:, 0], d[:, 1], d[:, 2]
    ax, ay = a[:, 0], a[:, 1]
    e1x, e1y, e2x, e2y = b[:, 0] - ax, b[:, 1] - ay, c[:, 0] - ax, c[:, 1] - ay
    edges = torch.as_tensor(source.edges, device=device, dtype=f64)[vis]
    f1, f2 = edges[:, 0], edges[:, 1]
    inv = 1.0 / det
    ux, uy, vx, vy = e2y * inv, -e2x * inv, -e1y * inv, e1x * inv
    gx = ux[:, None] * f1 + vx[:, None] * f2
    gy = uy[:, None] * f1 + vy[:, None] * f2
    first = torch.as_tensor(source.tris, device=device, dtype=f64)[vis, 0]
    origin = first - ax[:, None] * gx - ay[:, None] * gy
    ex = torch.stack([e1x, c[:, 0] - b[:, 0], -e2x], 1)
    ey = torch.stack([e1y, c[:, 1] - b[:, 1], -e2y], 1)
    px, py = d[:, :, 0], d[:, :, 1]
    k = torch.sign(det)[:, None] / torch.sqrt(ex * ex + ey * ey)
    ea, eb, ec = -ey * k, ex * k, (ey * px - ex * py) * k + EDGE_TOL
    safe = torch.where(ea == 0, torch.ones_like(ea), ea)
    slope, icept = -eb / safe, -ec / safe
    left, right = ea > 0, ea < 0
    inf = torch.tensor(math.inf, device=device, dtype=f64)
    lo = torch.minimum(torch.minimum(a, b), c) - EDGE_TOL
    hi = torch.maximum(torch.maximum(a, b), c) + EDGE_TOL
    lo_s, lo_i = torch.where(left, slope, 0.0), torch.where(left, icept, -inf)
    hi_s, hi_i = torch.where(right, slope, 0.0), torch.where(right, icept, inf)
    y0 = torch.clamp(torch.ceil(lo[:, 1]), min=0).long()
    nrows = torch.clamp(torch.clamp(torch.floor(hi[:, 1]), max=h - 1).long() - y0 + 1, min=0)
    rt = torch.repeat_interleave(torch.arange(vis.numel(), device=device), nrows)
    starts = torch.cumsum(nrows, 0) - nrows
    yi = torch.arange(rt.numel(), device=device) + torch.repeat_interleave(y0 - starts, nrows)
    y = yi.to(f64)[:, None]
    lower = torch.maximum((lo_s[rt] * y + lo_i[rt]).amax(1), lo[rt, 0])
    upper = torch.minimum((hi_s[rt] * y + hi_i[rt]).amin(1), hi[rt, 0])
    xl = torch.clamp(torch.ceil(lower), min=0)
    n = torch.clamp(torch.clamp(torch.floor(upper), max=w - 1) - xl + 1, min=0).long()
    total = int(n.sum())
    if total == 0:
        return None
    seg = torch.repeat_interleave(torch.arange(rt.numel(), device=device), n, output_size=total)
    x = torch.arange(total, device=device) + torch.repeat_interleave(
        xl.long() - (torch.cumsum(n, 0) - n), n, output_size=total
    )
    pix = x + torch.repeat_interleave(yi * w, n, output_size=total)
    tid = (rt + 1)[seg]  # the position in drawing order: the last drawn (nearest) wins the max
    ids = torch.zeros(h * w, dtype=torch.long, device=device).scatter_reduce(0, pix, tid, "amax")
    win = ids[pix] == tid
    t = rt[seg][win]
    xf = x[win].to(f64)
    yf = yi[seg][win].to(f64)
    map_x = torch.full((h * w,), -1.0, dtype=torch.float32, device=device)
    map_y = torch.full((h * w,), -1.0, dtype=torch.float32, device=device)
    map_x[pix[win]] = (origin[t, 0] + gx[t, 0] * xf + gy[t, 0] * yf).float()
    map_y[pix[win]] = (origin[t, 1] + gx[t, 1] * xf + gy[t, 1] * yf).float()
    return map_x.view(h, w), map_y.view(h, w), (ids > 0).view(h, w)


def remap(image: Any, map_x: Any, map_y: Any) -> Any:
    """cv2.remap(INTER_LINEAR, BORDER_REPLICATE) of one (C, H, W) float image: (C, h, w)."""
    return sample(image[None], map_x[None], map_y[None])[0]


# -- colour -------------------------------------------------------------------------------------------------

_RGB2XYZ = ((0.412453, 0.357580, 0.180423), (0.212671, 0.715160, 0.072169), (0.019334, 0.119193, 0.950227))
_XYZ2RGB = ((3.240479, -1.53715, -0.498535), (-0.969256, 1.875991, 0.041556), (0.055648, -0.204043, 1.057311))
_WHITE = (0.950456, 1.0, 1.088754)


def rgb_to_lab(rgb: Any) -> Any:
    """(..., 3) RGB in [0, 1] -> CIE L*a*b* as OpenCV's float COLOR_RGB2LAB (sRGB gamma, D65)."""
    torch = _torch()
    lin = torch.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    m = torch.tensor(_RGB2XYZ, device=rgb.device, dtype=rgb.dtype)
    xyz = lin @ m.T / torch.tensor(_WHITE, device=rgb.device, dtype=rgb.dtype)
    f = torch.where(xyz > 0.008856, xyz.clamp(min=1e-12) ** (1.0 / 3.0), 7.787 * xyz + 16.0 / 116.0)
    fx, fy, fz = f.unbind(-1)
    yl = xyz[..., 1]
    lum = torch.where(yl > 0.008856, 116.0 * fy - 16.0, 903.3 * yl)
    return torch.stack([lum, 500.0 * (fx - fy), 200.0 * (fy - fz)], -1)


def lab_to_rgb(lab: Any) -> Any:
    """The inverse (OpenCV's float COLOR_LAB2RGB): RGB in [0, 1], clipped before the gamma."""
    torch = _torch()
    lum, a, b = lab.unbind(-1)
    low = lum <= 8.0
    yl = torch.where(low, lum / 903.3, ((lum + 16.0) / 116.0) ** 3)
    fy = torch.where(low, 7.787 * yl + 16.0 / 116.0, (lum + 16.0) / 116.0)
    fx, fz = a / 500.0 + fy, fy - b / 200.0

    def inv(f: Any) -> Any:
        return torch.where(f > 0.206893, f**3, (f - 16.0 / 116.0) / 7.787)

    xyz = torch.stack([inv(fx), yl, inv(fz)], -1) * torch.tensor(_WHITE, device=lab.device, dtype=lab.dtype)
    m = torch.tensor(_XYZ2RGB, device=lab.device, dtype=lab.dtype)
    lin = (xyz @ m.T).clamp(0.0, 1.0)
    return torch.where(lin <= 0.0031308, 12.92 * lin, 1.055 * lin.clamp(min=1e-12) ** (1.0 / 2.4) - 0.055)


# -- paste and colour conversion ----------------------------------------------------------------------------


def paste_regions(
    matrices: np.ndarray, patch_hw: tuple[int, int], frame_hw: tuple[int, int]
) -> list[tuple[int, int, int, int] | None]:
    """Each patch's frame box (x0, y0, x1, y1), clipped, from its crop corners (paste.paste_back's box)."""
    ph, pw = patch_hw
    fh, fw = frame_hw
    inv = invert_affines(matrices)
    corners = np.array([[0, 0], [pw, 0], [0, ph], [pw, ph]], dtype=np.float64)
    out: list[tuple[int, int, int, int] | None] = []
    for m in inv:
        pts = corners @ m[:, :2].T + m[:, 2]
        x0, y0 = np.floor(pts.min(0)).astype(int)
        x1, y1 = np.ceil(pts.max(0)).astype(int)
        box = (max(int(x0), 0), max(int(y0), 0), min(int(x1), fw), min(int(y1), fh))
        out.append(box if box[2] > box[0] and box[3] > box[1] else None)
    return out


def paste_back(
    frame: Any, images: Any, masks: Any, matrices: np.ndarray
) -> list[tuple[int, int, int, int] | None]:
    """Blend N equal-size patches into `frame` ((H, W, 3) uint8 on the device, in place), in order.

    `images` (N, 3, h, w) float RGB 0..255, `masks` (N, 1, h, w) float, `matrices` (N, 2, 3) frame -> crop.
    Every patch is warped to the largest of their frame boxes in one grid_sample (image borders replicated,
    mask borders zero, as paste.paste_back), then blended box by box (boxes may overlap). Returns the boxes.
    """
    torch = _torch()
    boxes = paste_regions(matrices, tuple(images.shape[-2:]), tuple(frame.shape[:2]))
    live = [i for i, b in enumerate(boxes) if b is not None]
    if not live:
        return boxes
    rh = max(boxes[i][3] - boxes[i][1] for i in live)  # type: ignore[index]
    rw = max(boxes[i][2] - boxes[i][0] for i in live)  # type: ignore[index]
    shifted = np.asarray(matrices, dtype=np.float64)[live].copy()
    origins = np.array([boxes[i][:2] for i in live], dtype=np.float64)  # type: ignore[index]
    # region pixel (x, y) is frame pixel (x + x0, y + y0): its crop point is M @ (x + x0, y + y0, 1)
    shifted[:, :, 2] += np.einsum("nij,nj->ni", shifted[:, :, :2], origins)
    sx, sy = affine_sources(torch.as_tensor(shifted, device=frame.device), rh, rw)
    idx = torch.as_tensor(live, device=frame.device)
    warped = sample(images[idx].float(), sx, sy, "border")
    alpha = sample(masks[idx].float(), sx, sy, "zeros").clamp(0.0, 1.0)
    for j, i in enumerate(live):
        x0, y0, x1, y1 = boxes[i]  # type: ignore[misc]
        region = frame[y0:y1, x0:x1]
        r = region.float().permute(2, 0, 1)
        blended = (warped[j, :, : y1 - y0, : x1 - x0] - r) * alpha[j, :, : y1 - y0, : x1 - x0] + r + 0.5
        region.copy_(blended.clamp(0.5, 255.5).permute(1, 2, 0).to(torch.uint8))
    return boxes


_Y = (0.256788, 0.504129, 0.097906)
_UV = ((-37.797, -74.203, 112.0, 128.0 * 255.0), (112.0, -93.786, -18.214, 128.0 * 255.0))


def rgb_to_i420(frame: Any) -> Any:
    """(H, W, 3) uint8 RGB on the device -> (H * 3 / 2, W) uint8 I420 (gateway.media.colour.rgb_to_i420's
    conversion: BT.601 limited-range luma, chroma from each 2x2 block's mean)."""
    torch = _torch()
    import torch.nn.functional as F

    h, w = frame.shape[:2]
    if h % 2 or w % 2:
        raise ValueError(f"I420 needs even sizes, got {w}x{h}")
    r, g, b = frame.permute(2, 0, 1).float()  # planes: elementwise work, no (.., 3) @ (3,) products
    out = torch.empty((h * 3 // 2, w), dtype=torch.uint8, device=frame.device)
    out[:h] = torch.round(r * _Y[0] + g * _Y[1] + b * _Y[2] + 16.0).clamp(0, 255).to(torch.uint8)
    half = torch.floor(F.avg_pool2d(torch.stack([r, g, b])[None], 2)[0] + 0.5)  # INTER_AREA's uint8 mean
    flat = out[h:].view(-1)
    n = (h // 2) * (w // 2)
    for row, start in zip(_UV, (0, n), strict=True):
        c = (half[0] * row[0] + half[1] * row[1] + half[2] * row[2] + row[3]) * (1.0 / 255.0)
        flat[start : start + n] = torch.round(c).clamp(0, 255).to(torch.uint8).reshape(-1)
    return out


# -- the detail enhancer ------------------------------------------------------------------------------------


def detail_enhance(roi: Any, blend: float, fine: float, contrast: float) -> tuple[Any, Any]:
    """face_enhancer.DetailEnhancer's patch for one (h, w, 3) float box: (sharpened image, blend mask)."""
    torch = _torch()
    h, w = roi.shape[:2]
    size = float(max(h, w))
    x = roi.permute(2, 0, 1)[None]
    fine_b = gaussian_blur(x, max(0.8, size / 150))
    coarse_b = gaussian_blur(x, max(2.0, size / 25))
    sharp = (x + fine * (x - fine_b) + contrast * (x - coarse_b)).clamp(0.0, 255.0)[0].permute(1, 2, 0)
    # the ellipse is drawn on the host, as a constant per face size (cv2.ellipse's polygon, the same pixels)
    import cv2

    ellipse = np.zeros((h, w), dtype=np.float32)
    cv2.ellipse(ellipse, (w // 2, h // 2), (max(1, int(w * 0.42)), max(1, int(h * 0.45))), 0, 0, 360, 1.0, -1)
    e = torch.from_numpy(ellipse).to(roi.device)
    mask = gaussian_blur(e[None, None], max(1.0, size * 0.05))[0, 0] * blend
    return sharp, mask
