"""Per-face image work at 1280x720: the numpy/OpenCV functions against their torch twins
(engines.processors.tensor_ops) on the CPU, and on CUDA where torch sees a GPU.

Why: the torch ops let the image work run on the GPU beside the models; on the CPU (where CI runs them) they
must not cost much more than the numpy path. The frame: the astronaut portrait, a presenter's close-up, with
its FaceMesh from the real pipeline. The ops: the swap's, the enhancers' and RGB -> I420; the JSON holds the
median and p90 wall time per op and backend (CUDA timings synchronise first), plus the frame's transfers.

    .venv/bin/python -m bench.tensor_ops --output reports/bench_tensor_ops.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from engines.frames import FaceTrack, FrameItem
from engines.models.store import ModelStore, default_model_dir
from engines.pipeline import Pipeline, PipelineConfig
from engines.processors import tensor_ops as T
from engines.processors import tensor_shading as S
from engines.processors.alignment import FFHQ_512, estimate_affine, warp_crop
from engines.processors.device_frames import DeviceFrames
from engines.processors.face_detector import Face
from engines.processors.face_enhancer import GFPGAN_SIZE, DetailEnhancer
from engines.processors.masks import BoxMaskConfig, box_mask, face_region_work_mask, paste_mask
from engines.processors.mesh_warp import MARGIN, warp_maps
from engines.processors.paste import FacePatch, feathered_polygon_mask, paste_back
from engines.processors.shading import relight
from engines.source.mesh import MeshSource
from engines.source.prepared import mesh_of
from loadgen.media import default_media_dir
from loadgen.percentiles import summary


def timed(fn: Callable[[], object], rounds: int, sync: Callable[[], None]) -> dict[str, float]:
    fn()
    sync()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1000.0)
    return summary(times, {"median_ms": 50, "p90_ms": 90}, 3)


def scene(media_dir: Path) -> np.ndarray:
    image = cv2.imread(str(media_dir / "astronaut.png"))
    if image is None:
        raise SystemExit(f"no astronaut.png in {media_dir} (run `python -m loadgen.media provision`)")
    face = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    frame = np.full((720, 1280, 3), 90, dtype=np.uint8)
    frame[:, 280:1000] = cv2.resize(face, (720, 720), interpolation=cv2.INTER_CUBIC)
    return frame


@dataclass(frozen=True)
class FaceWork:
    """One face's inputs to every op, taken once from the real pipeline's first frame, so that both backends
    time the same work on the same pixels."""

    frame: np.ndarray
    face: Face
    mesh: MeshSource
    local: np.ndarray  # the target mesh in the box's own coordinates
    h: int
    w: int
    maps: tuple[np.ndarray, np.ndarray, np.ndarray]
    warped: np.ndarray
    roi: np.ndarray
    hull: np.ndarray
    erode: int
    blur: float
    patch: FacePatch
    g_m: np.ndarray  # the GFPGAN enhancer's alignment
    g_base: np.ndarray
    g_image: np.ndarray
    g_patch: FacePatch
    fb: tuple[int, int, int, int]  # the face box, grown and even, for the box's I420


def face_work(frame: np.ndarray) -> FaceWork:
    """Run the pipeline once on `frame` and derive every op's inputs from the face it tracked."""
    pipeline = Pipeline.from_config(PipelineConfig(), ModelStore(default_model_dir(os.environ)))
    source = pipeline.prepare_source(frame, "astronaut")
    track = FaceTrack()
    pipeline.process([FrameItem(frame, source, track=track, time_s=0.0)])
    target = track.faces[0].shown.landmarks
    face = track.faces[0].shown
    pipeline.close()
    mesh = mesh_of(source)
    assert isinstance(mesh, MeshSource) and target is not None
    lo = np.floor(target.min(0)).astype(int) - MARGIN
    hi = np.ceil(target.max(0)).astype(int) + MARGIN
    x0, y0, x1, y1 = max(int(lo[0]), 0), max(int(lo[1]), 0), min(int(hi[0]), 1280), min(int(hi[1]), 720)
    h, w = y1 - y0, x1 - x0
    local = target.astype(np.float64) - (x0, y0)
    maps = warp_maps(local, mesh, h, w)
    assert maps is not None
    warped = cv2.remap(mesh.box_image, maps[0], maps[1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    roi = np.ascontiguousarray(frame[y0:y1, x0:x1])
    hull = cv2.convexHull(local[mesh.mask_points].astype(np.float32)).reshape(-1, 2)
    erode, blur = max(1, int(max(h, w) * 0.04)), max(0.5, max(h, w) * 0.035)
    patch = FacePatch(
        image=warped.astype(np.float32),
        mask=np.ones((h, w), np.float32) * 0.8,
        matrix=np.array([[1.0, 0.0, -x0], [0.0, 1.0, -y0]], np.float32),
    )
    # the GFPGAN enhancer's image work around its model: the aligned 512 crop in, its masked paste out
    g_m = estimate_affine(face.kps5, FFHQ_512, GFPGAN_SIZE, robust=True)
    g_base = box_mask(GFPGAN_SIZE, BoxMaskConfig())
    g_image = warp_crop(frame, g_m, GFPGAN_SIZE).astype(np.float32) * 0.9 + 10.0  # a stand-in output
    g_patch = FacePatch(image=g_image, mask=paste_mask(face.box, g_m, g_base) * 0.8, matrix=g_m)
    fb = (
        max(int(face.box[0]) - 1, 0) & ~1,
        max(int(face.box[1]) - 1, 0) & ~1,
        min(int(np.ceil(face.box[2])) + 1, 1280) & ~1,
        min(int(np.ceil(face.box[3])) + 1, 720) & ~1,
    )
    return FaceWork(
        frame,
        face,
        mesh,
        local,
        h,
        w,
        maps,
        warped,
        roi,
        hull,
        erode,
        blur,
        patch,
        g_m,
        g_base,
        g_image,
        g_patch,
        fb,
    )


def numpy_ops(s: FaceWork) -> dict[str, Callable[[], object]]:
    """The numpy/OpenCV path of each op."""
    from gateway.media.colour import rgb_to_i420

    frame, face, mesh, local, h, w, maps, fb = s.frame, s.face, s.mesh, s.local, s.h, s.w, s.maps, s.fb
    enhancer = DetailEnhancer(0.8)

    def gfpgan_crop() -> object:
        crop = warp_crop(frame, s.g_m, GFPGAN_SIZE).astype(np.float32)
        return (crop.transpose(2, 0, 1) / 255.0 - 0.5) / 0.5

    def gfpgan_paste() -> object:
        return paste_back(
            frame.copy(), FacePatch(s.g_image, paste_mask(face.box, s.g_m, s.g_base) * 0.8, s.g_m)
        )

    return {
        "mesh_rasterise": lambda: warp_maps(local, mesh, h, w),
        "remap": lambda: cv2.remap(
            mesh.image, maps[0], maps[1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        ),
        "feathered_mask": lambda: feathered_polygon_mask(h, w, s.hull, erode=s.erode, blur=s.blur),
        "relight": lambda: relight(
            s.warped, s.roi, maps[2], float(max(s.h, s.w)), maps[2].astype(np.float32)
        ),
        "detail_enhance": lambda: enhancer.enhance_one(frame, face),
        "paste": lambda: paste_back(frame.copy(), s.patch),
        "rgb_to_i420": lambda: rgb_to_i420(frame),
        "rgb_to_i420_box": lambda: rgb_to_i420(np.ascontiguousarray(frame[fb[1] : fb[3], fb[0] : fb[2]])),
        "gfpgan_crop": gfpgan_crop,
        "gfpgan_paste": gfpgan_paste,
    }


def torch_timings(torch: Any, dev_name: str, s: FaceWork, rounds: int) -> dict[str, dict[str, float]]:
    """The torch twin of each op on `dev_name`, timed; on CUDA also the frame's transfers."""
    frame, face, mesh, local, h, w, fb, g_m = s.frame, s.face, s.mesh, s.local, s.h, s.w, s.fb, s.g_m
    dev = torch.device(dev_name)
    sync: Callable[[], None] = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    src = torch.from_numpy(mesh.image).permute(2, 0, 1).float().to(dev)
    t_frame = torch.from_numpy(frame).to(dev)
    t_warped, t_roi = torch.from_numpy(s.warped).to(dev), torch.from_numpy(s.roi).to(dev)
    t_maps = T.warp_maps(local, mesh, h, w, dev)
    assert t_maps is not None
    t_img = torch.from_numpy(s.patch.image).permute(2, 0, 1)[None].to(dev)
    t_mask = torch.from_numpy(s.patch.mask)[None, None].to(dev)
    box = face.box
    ex0, ey0 = max(int(np.floor(box[0])), 0), max(int(np.floor(box[1])), 0)
    ex1, ey1 = min(int(np.ceil(box[2])), 1280), min(int(np.ceil(box[3])), 720)
    t_face = t_frame[ey0:ey1, ex0:ex1].float()
    t_g_image = torch.from_numpy(s.g_patch.image).permute(2, 0, 1)[None].to(dev)
    t_g_base = torch.from_numpy(np.array(s.g_base)).to(dev)

    def t_gfpgan_crop() -> object:
        crop = T.frame_crops(t_frame, g_m[None], GFPGAN_SIZE)
        return torch.floor(crop + 0.5).clamp(0, 255) * (2.0 / 255.0) - 1.0

    def t_gfpgan_paste() -> object:
        work = face_region_work_mask(face.box, g_m, GFPGAN_SIZE)
        region = T.resize_linear(torch.from_numpy(work)[None, None].to(dev), GFPGAN_SIZE)
        return T.paste_back(t_frame.clone(), t_g_image, t_g_base * region * 0.8, g_m[None])

    ops: dict[str, Callable[[], object]] = {
        "mesh_rasterise": lambda: T.warp_maps(local, mesh, h, w, dev),
        "remap": lambda: T.remap(src, t_maps[0], t_maps[1]),
        "feathered_mask": lambda: T.feathered_polygon_mask(h, w, s.hull, s.erode, s.blur, dev),
        "relight": lambda: S.relight(t_warped, t_roi, t_maps[2], float(max(h, w)), t_maps[2].float()),
        "detail_enhance": lambda: T.detail_enhance(t_face, 0.8, 0.8, 0.4),
        "paste": lambda: T.paste_back(t_frame.clone(), t_img, t_mask, s.patch.matrix[None]),
        "rgb_to_i420": lambda: T.rgb_to_i420(t_frame),
        "rgb_to_i420_box": lambda: T.rgb_to_i420(t_frame[fb[1] : fb[3], fb[0] : fb[2]]),
        "gfpgan_crop": t_gfpgan_crop,
        "gfpgan_paste": t_gfpgan_paste,
    }
    res = {k: timed(f, rounds, sync) for k, f in ops.items()}
    if dev.type == "cuda":
        res["upload_frame"] = timed(lambda: torch.from_numpy(frame).to(dev), rounds, sync)
        res["download_frame"] = timed(lambda: t_frame.cpu(), rounds, sync)
        on_device = DeviceFrames(dev, lambda _: frame)
        on_device.get(0)
        res["download_frame_box_i420"] = timed(  # the device path's one download: RGB + the box's I420
            lambda: on_device.download({0: [fb]}),
            rounds,
            sync,
        )
    return res


def table_lines(results: dict[str, Any], names: list[str]) -> list[str]:
    """Median ms per op (rows) and backend (columns); an op no backend timed is left out."""
    cols = list(results)
    lines = [f"{'op (median ms)':<24}" + "".join(f"{c:>16}" for c in cols)]
    for n in names + ["upload_frame", "download_frame", "download_frame_box_i420"]:
        cells = [results[c].get(n, {}).get("median_ms") for c in cols]
        if any(v is not None for v in cells):
            lines.append(f"{n:<24}" + "".join(f"{'-' if v is None else v:>16}" for v in cells))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (the gateway's workers run one each)"
    )
    p.add_argument("--output", type=Path, help="write the JSON report here (default: none, printed only)")
    p.add_argument("--media-dir", type=Path, default=default_media_dir(os.environ))
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        p.error("needs torch: pip install 'livefuse[torch]'")
    if not (args.media_dir / "astronaut.png").is_file():
        p.error(f"{args.media_dir}/astronaut.png missing: run `make provision`")

    torch.set_num_threads(args.threads)
    work = face_work(scene(args.media_dir))
    ops = numpy_ops(work)
    results: dict[str, Any] = {
        "numpy_opencv": {k: timed(f, args.rounds, lambda: None) for k, f in ops.items()}
    }
    for dev_name in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        results[f"torch_{dev_name}"] = torch_timings(torch, dev_name, work, args.rounds)
    report = {
        "frame": "1280x720",
        "face_box_px": [work.w, work.h],
        "rounds": args.rounds,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "results": results,
    }
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2))
    for line in table_lines(results, list(ops)):
        print(line)
    if args.output is not None:
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
