"""The tensor image ops (CPU torch here; the same code runs on CUDA) against the numpy/OpenCV path they
mirror, on real faces. Bounds, per op (grey levels 0..255 unless said):
- mesh rasterisation: the same covered pixels; source points within 1e-3 px;
- remap and aligned crops (grid_sample vs OpenCV's 5-bit fixed-point bilinear): max 2, PSNR >= 45 dB;
- aligned crops read from the faces' box only vs from the whole frame: max 0.01 (float32 grid coordinates);
- Gaussian blur: max 1e-3; polygon fill (pixel centres vs cv2.fillConvexPoly's edge rule): IoU > 0.98;
  feathered polygon masks: mean 0.01 and max 0.35 of full strength (edge pixels only); kept regions: mean
  0.01, max 0.75 (their feather is sharper), the same pixels at full strength;
- colour matching (exact sRGB gamma vs OpenCV's spline table): max 1.5, mean 0.25;
- paste-back of overlapping non-integer patches: max 2, PSNR >= 45 dB; RGB -> I420: max 1;
- the detail enhancer: image and mask max 0.01.
"""

from __future__ import annotations

import av
import cv2
import numpy as np
import pytest

from engines.frames import FaceTrack, FrameItem, SourceFace
from engines.pipeline import Pipeline
from engines.processors import tensor_ops as T
from engines.processors import tensor_shading as S
from engines.processors.alignment import ARCFACE_128_V2, FFHQ_512, estimate_affine, warp_crop
from engines.processors.face_detector import Face
from engines.processors.face_enhancer import DetailEnhancer
from engines.processors.masks import region_mask, skin_weight
from engines.processors.mesh_warp import MARGIN, warp_maps
from engines.processors.paste import FacePatch, feathered_polygon_mask, paste_back
from engines.processors.shading import relight
from engines.source.mesh import MeshSource
from gateway.media.colour import rgb_to_i420

torch = pytest.importorskip("torch")
CPU = torch.device("cpu")


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.fixture(scope="module")
def faces(
    pipeline: Pipeline, source: SourceFace, media: dict[str, object], astronaut: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(frame, mesh): three frames of the talking carphone head at 640x480 and the astronaut portrait."""
    frames: list[np.ndarray] = []
    with av.open(str(media["carphone_pristine.mp4"])) as c:
        for i, decoded in enumerate(c.decode(video=0)):
            if i % 20 == 0:
                rgb = np.asarray(decoded.to_ndarray(format="rgb24"), dtype=np.uint8)
                frames.append(np.asarray(cv2.resize(rgb, (640, 480), interpolation=cv2.INTER_CUBIC)))
            if i == 59:
                break
    frames.append(astronaut)
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for frame in frames:
        track = FaceTrack()
        pipeline.process([FrameItem(frame, source, track=track, time_s=0.0)])
        mesh = track.faces[0].shown.landmarks
        assert mesh is not None
        out.append((frame, mesh))
    return out


def _box(frame: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, int, int, int, int]:
    lo = np.floor(target.min(0)).astype(int) - MARGIN
    hi = np.ceil(target.max(0)).astype(int) + MARGIN
    x0, y0 = max(int(lo[0]), 0), max(int(lo[1]), 0)
    x1, y1 = min(int(hi[0]), frame.shape[1]), min(int(hi[1]), frame.shape[0])
    return target.astype(np.float64) - (x0, y0), x0, y0, x1, y1


def test_mesh_rasterisation_and_remap_match(
    source: SourceFace, faces: list[tuple[np.ndarray, np.ndarray]]
) -> None:
    mesh = source.prepared.mesh
    assert isinstance(mesh, MeshSource)
    src = torch.from_numpy(np.ascontiguousarray(mesh.box_image)).permute(2, 0, 1).float()
    for frame, target in faces:
        local, x0, y0, x1, y1 = _box(frame, target)
        h, w = y1 - y0, x1 - x0
        want, got = warp_maps(local, mesh, h, w), T.warp_maps(local, mesh, h, w, CPU)
        assert want is not None and got is not None
        (wx, wy, wc), (gx, gy, gc) = want, (t.numpy() for t in got)
        assert (wc == gc).all(), f"coverage differs at {(wc != gc).sum()} px"
        assert np.abs(wx - gx).max() < 1e-3 and np.abs(wy - gy).max() < 1e-3
        ref = cv2.remap(mesh.box_image, wx, wy, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        out = T.remap(src, got[0], got[1]).permute(1, 2, 0).numpy()
        out8 = np.floor(out + 0.5).clip(0, 255).astype(np.uint8)
        assert np.abs(out8.astype(int) - ref.astype(int))[wc].max() <= 2
        assert psnr(out8[wc], ref[wc]) >= 45


def test_mesh_rasterisation_matches_on_a_turned_face(source: SourceFace) -> None:
    """A face turned 40-55 degrees, where the nose's triangles overlap the far cheek's: the device draws
    the same nearest triangle at every pixel as the host (the drawing order is by depth, not index)."""
    mesh = source.prepared.mesh
    assert isinstance(mesh, MeshSource) and mesh.shape is not None
    for yaw in (40.0, -55.0):
        a = np.deg2rad(yaw)
        rot = np.array([[np.cos(a), 0.0, np.sin(a)], [0.0, 1.0, 0.0], [-np.sin(a), 0.0, np.cos(a)]])
        local = (mesh.shape.points @ rot.T)[:, :2]
        local = local - local.min(0) + 6.0
        w, h = (np.ceil(local.max(0)) + 6).astype(int)
        want, got = warp_maps(local, mesh, h, w), T.warp_maps(local, mesh, h, w, CPU)
        assert want is not None and got is not None
        (wx, wy, wc), (gx, gy, gc) = want, (t.numpy() for t in got)
        assert (wc == gc).all(), f"coverage differs at {(wc != gc).sum()} px"
        assert np.abs(wx - gx).max() < 1e-3 and np.abs(wy - gy).max() < 1e-3


def test_aligned_crops_in_one_batch_match_warp_crop(
    faces: list[tuple[np.ndarray, np.ndarray]], pipeline: Pipeline
) -> None:
    frame = faces[-1][0]
    face = pipeline.detect([frame])[0][0]
    frames = torch.from_numpy(frame).permute(2, 0, 1)[None].float()
    for template, size in ((FFHQ_512, 512), (ARCFACE_128_V2, 128)):
        ms = np.stack([estimate_affine(face.kps5 * s, template, size) for s in (1.0, 0.97, 1.03)])
        crops = T.affine_crops(frames, [0, 0, 0], ms, size)
        for i, m in enumerate(ms):
            want = warp_crop(frame, m, size)
            got = np.floor(crops[i].permute(1, 2, 0).numpy() + 0.5).clip(0, 255).astype(np.uint8)
            assert np.abs(got.astype(int) - want.astype(int)).max() <= 2 and psnr(got, want) >= 45


def test_frame_crops_read_only_the_faces_box_and_equal_whole_frame_crops(
    faces: list[tuple[np.ndarray, np.ndarray]], pipeline: Pipeline
) -> None:
    frame = faces[-1][0]
    face = pipeline.detect([frame])[0][0]
    whole = torch.from_numpy(frame).permute(2, 0, 1)[None].float()
    # the 512 FFHQ crop reaches past the portrait's edges; a shifted one lies wholly outside the frame
    far = estimate_affine(face.kps5, FFHQ_512, 512)
    far[:, 2] += (3000.0, -2000.0)
    ms = np.stack(
        [estimate_affine(face.kps5, FFHQ_512, 512), estimate_affine(face.kps5 * 0.5, FFHQ_512, 512), far]
    )
    want = T.affine_crops(whole, [0, 0, 0], ms, 512)
    got = T.frame_crops(torch.from_numpy(frame), ms, 512)
    assert got.shape == want.shape and float((got - want).abs().max()) < 0.01  # float32 grid coordinates


def test_blur_and_feathered_masks_match_opencv() -> None:
    rng = np.random.default_rng(0)
    img = rng.random((61, 47), dtype=np.float32) * 255
    for sigma in (0.8, 2.0, 5.5):
        want = cv2.GaussianBlur(img, (0, 0), sigma)
        got = T.gaussian_blur(torch.from_numpy(img)[None, None], sigma)[0, 0].numpy()
        assert np.abs(got - want).max() < 1e-3, sigma
    hull = np.array([[10.3, 8.2], [70.6, 12.1], [80.2, 60.7], [40.4, 95.5], [6.1, 55.3]])
    filled = feathered_polygon_mask(100, 90, hull, erode=0, blur=0.0) > 0.5
    mine = T.polygon_mask(100, 90, hull, CPU).numpy() > 0.5
    assert (filled & mine).sum() / (filled | mine).sum() > 0.98  # the two fills differ on edge pixels only
    for erode, blur in ((3, 2.5), (6, 4.0), (0, 1.5)):
        want = feathered_polygon_mask(100, 90, hull, erode=erode, blur=blur)
        got = T.feathered_polygon_mask(100, 90, hull, erode, blur, CPU).numpy()
        assert np.abs(got - want).mean() < 0.01 and np.abs(got - want).max() < 0.35, (erode, blur)


def test_kept_region_masks_match(faces: list[tuple[np.ndarray, np.ndarray]]) -> None:
    for frame, target in faces:
        local, x0, y0, x1, y1 = _box(frame, target)
        h, w = y1 - y0, x1 - x0
        for keep in (("mouth",), ("mouth", "eyes")):
            want = region_mask((h, w), local, keep, float(max(h, w)))
            got = T.region_mask(h, w, local, keep, float(max(h, w)), CPU).numpy()
            # the fills differ on edge pixels only (a sharp feather turns a pixel of fill into up to 0.75)
            assert np.abs(got - want).mean() < 0.01 and np.abs(got - want).max() < 0.75, keep
            assert ((got > 0.97) == (want > 0.97)).mean() > 0.99, keep  # the same openings at full strength


def test_relight_matches(source: SourceFace, faces: list[tuple[np.ndarray, np.ndarray]]) -> None:
    mesh = source.prepared.mesh
    assert isinstance(mesh, MeshSource)
    for frame, target in faces:
        local, x0, y0, x1, y1 = _box(frame, target)
        maps = warp_maps(local, mesh, y1 - y0, x1 - x0)
        assert maps is not None
        image = mesh.box_image
        warped = cv2.remap(image, maps[0], maps[1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        roi = frame[y0:y1, x0:x1]
        size = float(max(x1 - x0, y1 - y0))
        skin = maps[2] & skin_weight((y1 - y0, x1 - x0), local, size)
        want = relight(warped.astype(np.float32), roi, skin, size)
        got = S.relight(
            torch.from_numpy(warped.astype(np.float32)),
            torch.from_numpy(np.ascontiguousarray(roi)),
            torch.from_numpy(skin),
            size,
        ).numpy()
        diff = np.abs(got - want)
        # the two LAB conversions and the two filters' roundings: well under a grey level
        assert diff.max() <= 2.0 and diff.mean() <= 0.5, (diff.max(), diff.mean())


def test_batched_paste_matches_paste_back(faces: list[tuple[np.ndarray, np.ndarray]]) -> None:
    frame = faces[0][0]
    rng = np.random.default_rng(3)
    size = 128
    patches = []
    for cx, cy, angle in ((300.4, 220.7, 0.3), (340.2, 250.1, -0.5)):  # overlapping, rotated, subpixel
        c, s = np.cos(angle) * 0.9, np.sin(angle) * 0.9
        m = np.array(
            [[c, s, size / 2 - (c * cx + s * cy)], [-s, c, size / 2 - (-s * cx + c * cy)]], np.float32
        )
        image = (rng.random((size, size, 3)) * 255).astype(np.float32)
        mask = cv2.GaussianBlur(np.pad(np.ones((size - 40, size - 40), np.float32), 20), (0, 0), 6)
        patches.append(FacePatch(image=image, mask=mask, matrix=m))
    want = frame.copy()
    boxes = [paste_back(want, p) for p in patches]
    got = torch.from_numpy(frame.copy())
    images = torch.from_numpy(np.stack([p.image for p in patches])).permute(0, 3, 1, 2)
    masks = torch.from_numpy(np.stack([p.mask for p in patches]))[:, None]
    got_boxes = T.paste_back(got, images, masks, np.stack([p.matrix for p in patches]))
    assert got_boxes == boxes
    g = got.numpy()
    assert np.abs(g.astype(int) - want.astype(int)).max() <= 2 and psnr(g, want) >= 45
    untouched = np.ones(frame.shape[:2], bool)
    for x0, y0, x1, y1 in boxes:  # type: ignore[misc]
        untouched[y0:y1, x0:x1] = False
    assert (g[untouched] == frame[untouched]).all()


def test_rgb_to_i420_matches_the_encoder_path(faces: list[tuple[np.ndarray, np.ndarray]]) -> None:
    for frame in (faces[0][0], faces[-1][0][:510, :382]):
        want = rgb_to_i420(np.ascontiguousarray(frame))
        got = T.rgb_to_i420(torch.from_numpy(np.ascontiguousarray(frame))).numpy()
        assert want is not None and got.shape == want.shape
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    with pytest.raises(ValueError, match="even"):
        T.rgb_to_i420(torch.zeros((5, 4, 3), dtype=torch.uint8))


def test_detail_enhancer_matches(faces: list[tuple[np.ndarray, np.ndarray]], pipeline: Pipeline) -> None:
    frame = faces[-1][0]
    face: Face = pipeline.detect([frame])[0][0]
    patch = DetailEnhancer(0.8).enhance_one(frame, face)
    assert patch is not None
    x0, y0 = int(-patch.matrix[0, 2]), int(-patch.matrix[1, 2])
    h, w = patch.mask.shape
    roi = torch.from_numpy(frame[y0 : y0 + h, x0 : x0 + w].astype(np.float32))
    image, mask = T.detail_enhance(roi, 0.8, 0.8, 0.4)
    assert np.abs(image.numpy() - patch.image).max() < 0.01
    assert np.abs(mask.numpy() - patch.mask).max() < 0.01
