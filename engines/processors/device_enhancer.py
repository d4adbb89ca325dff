"""The enhancer stage's image work on one torch device: crops in, blend and paste back out, on frames that
stay there (`DeviceFrames`), so the enhancer does not download the frame the swap left on the device.

Why: with the torch engine on CUDA the swapped frame is already on the GPU; the enhancer's crops, masks and
paste belong beside it. Mirrors face_enhancer step by step (tests/unit/test_device_enhancer.py holds the two
to a bound): "detail" sharpens each face box and blends it through its feathered ellipse; "gfpgan_1.4" cuts
the 512 FFHQ crops of a frame in one grid_sample, runs the model, and pastes every face back in one warp
with its box mask limited to the face's region. An engine on the same torch device (`DeviceTensorEngine`:
the torch engine) takes the 512 crops and returns its output there, so nothing crosses the bus; any other
engine (ONNX Runtime, TensorRT, Triton, or a torch engine on another device) takes host arrays, so the
crops (not the frame) go down to it and its output comes back up. The affines and the 128 px region masks
are made on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engines.engine import DeviceTensorEngine, run_batched, run_batched_tensors, same_device
from engines.factory import EngineConfig
from engines.frames import Box
from engines.processors import tensor_ops as T
from engines.processors.alignment import FFHQ_512, estimate_affine
from engines.processors.device_frames import DeviceFrames
from engines.processors.device_mesh_warp import torch_cuda_device
from engines.processors.face_detector import Face
from engines.processors.face_enhancer import GFPGAN_SIZE, DetailEnhancer, GfpganEnhancer
from engines.processors.masks import face_region_work_mask


def enhance_device(configured: str | None, engine: EngineConfig) -> str | None:
    """Where the enhancer stage's image work runs: the configured image device, or the torch engine's CUDA
    device; None (numpy/OpenCV) otherwise."""
    return configured if configured is not None else torch_cuda_device(engine)


class DeviceEnhancer:
    def __init__(self, enhancer: DetailEnhancer | GfpganEnhancer, device: str) -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)
        self.enhancer = enhancer
        self.name = enhancer.name
        self._base_mask: Any = None
        # the model's engine when it takes tensors on this device: GFPGAN's crops then never leave it
        self.tensor_engine: DeviceTensorEngine | None = None
        if isinstance(enhancer, GfpganEnhancer):  # the host's copy is read-only
            self._base_mask = torch.from_numpy(np.array(enhancer.base_mask)).to(self.device)
            engine = enhancer.engine
            if isinstance(engine, DeviceTensorEngine) and same_device(engine.device, str(self.device)):
                self.tensor_engine = engine

    def enhance_and_paste(
        self, frames: DeviceFrames, jobs: Sequence[tuple[int, Face]]
    ) -> dict[int, list[Box]]:
        """Enhance every (frame key, face) into its frame on the device, faces of a frame in job order; the
        boxes pasted per frame."""
        with self._torch.inference_mode():
            if isinstance(self.enhancer, GfpganEnhancer):
                return self._gfpgan(self.enhancer, frames, jobs)
            return self._detail(self.enhancer, frames, jobs)

    def _detail(
        self, enhancer: DetailEnhancer, frames: DeviceFrames, jobs: Sequence[tuple[int, Face]]
    ) -> dict[int, list[Box]]:
        touched: dict[int, list[Box]] = {}
        for key, face in jobs:
            frame = frames.get(key)
            fh, fw = frame.shape[:2]
            x0, y0 = max(int(np.floor(face.box[0])), 0), max(int(np.floor(face.box[1])), 0)
            x1, y1 = min(int(np.ceil(face.box[2])), fw), min(int(np.ceil(face.box[3])), fh)
            if x1 - x0 < 4 or y1 - y0 < 4:
                continue
            roi = frame[y0:y1, x0:x1]
            sharp, mask = T.detail_enhance(roi.float(), enhancer.blend, enhancer.fine, enhancer.contrast)
            T.blend(roi, sharp, mask)
            touched.setdefault(key, []).append((x0, y0, x1, y1))
        return touched

    def _gfpgan(
        self, enhancer: GfpganEnhancer, frames: DeviceFrames, jobs: Sequence[tuple[int, Face]]
    ) -> dict[int, list[Box]]:
        torch = self._torch
        if not jobs:
            return {}
        size = GFPGAN_SIZE
        matrices = np.stack([estimate_affine(face.kps5, FFHQ_512, size, robust=True) for _, face in jobs])
        keys = list(dict.fromkeys(key for key, _ in jobs))  # each frame's faces cropped in one batch
        rows = {key: [j for j, (k, _) in enumerate(jobs) if k == key] for key in keys}
        crops = torch.empty((len(jobs), 3, size, size), dtype=torch.float32, device=self.device)
        for key, idx in rows.items():
            crops[idx] = T.frame_crops(frames.get(key), matrices[idx], size)
        # warp_crop hands over uint8: round as it does before normalising to [-1, 1]
        batch = torch.floor(crops + 0.5).clamp(0, 255) * (2.0 / 255.0) - 1.0
        if self.tensor_engine is not None:
            out = next(iter(run_batched_tensors(self.tensor_engine, {enhancer.input_name: batch}).values()))
        else:  # a host engine: the crops go down and the faces come back up
            down = {enhancer.input_name: batch.cpu().numpy()}
            host = next(iter(run_batched(enhancer.engine, down).values()))
            out = torch.from_numpy(np.ascontiguousarray(host)).to(self.device)
        images = (out.clamp(-1.0, 1.0) + 1.0) * 127.5
        work = np.stack(
            [face_region_work_mask(face.box, m, size) for (_, face), m in zip(jobs, matrices, strict=True)]
        )
        region = torch.from_numpy(work[:, None]).to(self.device)
        if region.shape[-1] != size:
            region = T.resize_linear(region, size)
        masks = self._base_mask * region * enhancer.blend
        touched: dict[int, list[Box]] = {}
        for key, idx in rows.items():
            boxes = T.paste_back(frames.get(key), images[idx], masks[idx], matrices[idx])
            touched[key] = [b for b in boxes if b is not None]
        return {k: v for k, v in touched.items() if v}
