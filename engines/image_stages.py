"""The per-batch image stages, once the faces are known: swap -> enhance -> paste back, on the host or on a
torch device, each stage one batch over every face of every frame that asked for it.

Host path: the swapper and the enhancer (numpy/OpenCV) make patches, pasted into copies of the frames.
Device path (`PipelineConfig.image_device`, or the torch engine on CUDA): the frames go up once
(`DeviceFrames`), mesh_warp (`DeviceMeshWarp`) and the enhancer (`DeviceEnhancer`) swap and paste in place
there, and every touched frame comes back in one download, with the I420 planes of its changed boxes (timed
as the paste: the device stages' last step). The paths mix: a host enhancer after a device swap reads the
swapped frames, so they come back first; a device enhancer on another device than the swap's takes them up
again. Apart from the pipeline because this part is about pixels and where they live; the pipeline finds
the faces and hands over (item, face) jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from engines.frames import STAGE_ENHANCE, STAGE_PASTE, STAGE_SWAP, Box, FaceSettings, FrameItem, SourceFace
from engines.processors.device_enhancer import DeviceEnhancer
from engines.processors.device_frames import DeviceFrames
from engines.processors.device_mesh_warp import DeviceMeshWarp
from engines.processors.face_detector import Face
from engines.processors.face_enhancer import DetailEnhancer, GfpganEnhancer
from engines.processors.inswapper import InswapperSwapper
from engines.processors.mesh_warp import MeshWarpSwapper
from engines.processors.paste import FacePatch, paste_back
from engines.source.mesh import MeshSource
from engines.stage_timing import StageBook


def image_threads(threads: int) -> None:
    """OpenCV's threads for this process's image work: `threads` per call, as the engines' (ONNX Runtime's
    intra-op threads); 0 leaves OpenCV's own (all cores). Where each worker runs single-threaded (the CPU
    default: one worker per core), OpenCV's pool would otherwise spread every small face-box operation over
    all cores against the other workers: through the gateway at 640x360 that cost about a tenth more CPU per
    frame and bought no latency (docs/BENCHMARKS.md). Process-wide, as OpenCV's setting is."""
    if threads > 0:
        cv2.setNumThreads(threads)


Swapper = MeshWarpSwapper | InswapperSwapper
Enhancer = DetailEnhancer | GfpganEnhancer
Job = tuple[int, Face]  # (item index, face)


@dataclass
class Staged:
    """What the image stages left, per item index: the changed frames (host RGB), their changed boxes, and,
    for frames that came back from the device, those boxes' I420 planes (None for odd-sized frames)."""

    images: dict[int, np.ndarray]
    changed: dict[int, list[Box]]
    i420: dict[int, tuple[np.ndarray | None, ...] | None]


class ImageStages:
    def __init__(
        self,
        swapper: Swapper,
        enhancer: Enhancer | None,
        swap_device: str | None,
        enhance_device: str | None,
        swap_data: Callable[[SourceFace], MeshSource | np.ndarray],
        settings_of: Callable[[FrameItem], FaceSettings],
    ) -> None:
        """`swap_device` / `enhance_device`: the torch device for that stage's image work (None: numpy/OpenCV;
        a swap device only with mesh_warp). `swap_data` gives the swapper's per-source data (made when the
        source was prepared), `settings_of` an item's face settings (the regions kept)."""
        self.swapper = swapper
        self.enhancer = enhancer
        self._swap_data = swap_data
        self._settings_of = settings_of
        self.device_swap: DeviceMeshWarp | None = None
        if swap_device is not None and isinstance(swapper, MeshWarpSwapper):
            self.device_swap = DeviceMeshWarp(swap_device)
        self.device_enhance: DeviceEnhancer | None = None
        if enhancer is not None and enhance_device is not None:
            self.device_enhance = DeviceEnhancer(enhancer, enhance_device)

    def run(
        self, items: Sequence[FrameItem], swap_jobs: list[Job], enhance_jobs: list[Job], book: StageBook
    ) -> Staged:
        """Swap every face of `swap_jobs`, then enhance every face of `enhance_jobs`, each pasted back; the
        frames they changed, back on the host."""
        working: dict[int, np.ndarray] = {}
        touched: dict[int, list[Box]] = {}
        on_device: DeviceFrames | None = None  # frames the device stages hold, brought back once at the end
        if swap_jobs and self.device_swap is not None:
            on_device = DeviceFrames(self.device_swap.device, lambda i: working.get(i, items[i].image))
            with book.time(STAGE_SWAP, [i for i, _ in swap_jobs], len(swap_jobs)):  # swap and paste
                self._device_swap(self.device_swap, on_device, items, swap_jobs, touched)
        elif swap_jobs:
            with book.time(STAGE_SWAP, [i for i, _ in swap_jobs], len(swap_jobs)):
                patches = self._swap(items, swap_jobs)
            self._paste(items, working, swap_jobs, patches, book, touched)

        if enhance_jobs and self.device_enhance is not None:
            if on_device is None or on_device.device != self.device_enhance.device:
                self._download(on_device, working, touched, book)
                on_device = DeviceFrames(self.device_enhance.device, lambda i: working.get(i, items[i].image))
            with book.time(STAGE_ENHANCE, [i for i, _ in enhance_jobs], len(enhance_jobs)):  # and paste
                for i, boxes in self.device_enhance.enhance_and_paste(on_device, enhance_jobs).items():
                    touched.setdefault(i, []).extend(boxes)
        elif enhance_jobs and self.enhancer is not None:
            self._download(on_device, working, touched, book)  # the host enhancer reads swapped frames
            on_device = None
            with book.time(STAGE_ENHANCE, [i for i, _ in enhance_jobs], len(enhance_jobs)):
                frames = [working.get(i, items[i].image) for i, _ in enhance_jobs]
                e_patches = self.enhancer.enhance(
                    [(fr, f) for fr, (_, f) in zip(frames, enhance_jobs, strict=True)]
                )
            self._paste(items, working, enhance_jobs, e_patches, book, touched)

        made = self._download(on_device, working, touched, book)
        return Staged(working, touched, made)

    def warmup(self, frame: np.ndarray, face: Face, mesh: MeshSource | None) -> None:
        """Run the device stages once on a synthetic frame and face (`mesh`: the swap's source and target),
        so that their first kernels, caches and transfers happen at start, not on the live path."""
        first = self.device_swap or self.device_enhance
        if first is None:
            return
        frames = DeviceFrames(first.device, lambda _: frame)
        touched: dict[int, list[Box]] = {}
        if self.device_swap is not None and mesh is not None and face.landmarks is not None:
            jobs = [(0, face.landmarks, mesh, FaceSettings().keep_regions)]
            touched = self.device_swap.swap_and_paste(frames, jobs)
        if self.device_enhance is not None:
            if self.device_enhance.device != frames.device:
                frames.download(touched)
                frames, touched = DeviceFrames(self.device_enhance.device, lambda _: frame), {}
            for i, boxes in self.device_enhance.enhance_and_paste(frames, [(0, face)]).items():
                touched.setdefault(i, []).extend(boxes)
        frames.download(touched)

    def _download(
        self,
        on_device: DeviceFrames | None,
        working: dict[int, np.ndarray],
        touched: dict[int, list[Box]],
        book: StageBook,
    ) -> dict[int, tuple[np.ndarray | None, ...] | None]:
        """The touched frames the device holds, back in `working` in one transfer; their I420 planes per
        changed box (timed as the paste: the device stages' last step)."""
        if on_device is None:
            return {}
        keys = [i for i in touched if i in on_device]
        if not keys:
            return {}
        with book.time(STAGE_PASTE, keys, len(keys)):
            back = on_device.download({i: touched[i] for i in keys})
        for i, d in back.items():
            working[i] = d.image
        return {i: d.regions for i, d in back.items()}

    def _swap(self, items: Sequence[FrameItem], jobs: list[Job]) -> list[FacePatch | None]:
        frames, data, faces = [], [], []
        keep = [self._settings_of(items[i]).keep_regions for i, _ in jobs]
        for i, f in jobs:
            src = items[i].source
            assert src is not None
            frames.append(items[i].image)
            data.append(self._swap_data(src))
            faces.append(f)
        if isinstance(self.swapper, InswapperSwapper):
            latents = [np.asarray(d, dtype=np.float32) for d in data]
            return list(self.swapper.swap(list(zip(frames, faces, latents, strict=True)), keep))
        mesh_jobs = []
        for fr, f, d in zip(frames, faces, data, strict=True):
            assert isinstance(d, MeshSource) and f.landmarks is not None
            mesh_jobs.append((fr, f.landmarks, d))
        shape = [self._settings_of(items[i]).shape for i, _ in jobs]
        return self.swapper.swap(mesh_jobs, keep, shape, [f.brows_rest for f in faces])

    def _device_swap(
        self,
        device_swap: DeviceMeshWarp,
        frames: DeviceFrames,
        items: Sequence[FrameItem],
        jobs: list[Job],
        touched: dict[int, list[Box]],
    ) -> None:
        device_jobs = []
        for i, f in jobs:
            src = items[i].source
            assert src is not None and f.landmarks is not None
            data = self._swap_data(src)
            assert isinstance(data, MeshSource)
            device_jobs.append((i, f.landmarks, data, self._settings_of(items[i]).keep_regions))
        shape = [self._settings_of(items[i]).shape for i, _ in jobs]
        rests = [f.brows_rest for _, f in jobs]
        for i, b in device_swap.swap_and_paste(frames, device_jobs, shape, rests).items():
            touched.setdefault(i, []).extend(b)

    def _paste(
        self,
        items: Sequence[FrameItem],
        working: dict[int, np.ndarray],
        jobs: list[Job],
        patches: Sequence[FacePatch | None],
        book: StageBook,
        touched: dict[int, list[Box]],
    ) -> None:
        pairs = [(i, p) for (i, _), p in zip(jobs, patches, strict=True) if p is not None]
        if not pairs:
            return
        with book.time(STAGE_PASTE, [i for i, _ in pairs], len(pairs)):
            for i, patch in pairs:
                if i not in working:
                    working[i] = np.array(items[i].image, dtype=np.uint8, copy=True)
                box = paste_back(working[i], patch)
                if box is not None:  # paste_back writes nothing outside the box it returns
                    touched.setdefault(i, []).append(box)
