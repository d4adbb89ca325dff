"""Per-face tracks across frames: box-overlap linking, One Euro landmark smoothing, when to run the detector.

Pure policy and small numeric state: the pipeline runs the models, this module decides and filters; the state
lives in each session's `engines.frames.FaceTrack`. Each rule answers a failure seen on live video
(docs/ARCHITECTURE.md "Faces on air"): detect only when needed (the degradation controller only lengthens the
interval); crops come from the smoothed mesh, so they do not jump when the detector runs; One Euro smoothing
keeps a still face from shimmering and a moving one from lagging; the next crop moves only past
`crop_tolerance`, led by the face's velocity; a lost face is relinked, looked for again, refined from its own
crop, and held for `hold_frames` so it does not flicker between swapped and unswapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from engines.frames import FaceTrack
from engines.processors.alignment import extent
from engines.processors.face_detector import Face
from engines.processors.face_expression import brows_pose, follow_rest
from engines.processors.face_landmarker import kps5_from_mesh


@dataclass(frozen=True)
class TrackingConfig:
    # Detect every K frames or T ms, whichever comes first: a newcomer waits at most that long. Tracking
    # keeps a face in view between detections, and a longer interval than this saves no more frame time.
    detect_every_frames: int = 10
    detect_every_ms: float = 1000.0
    hold_frames: int = 2
    link_iou: float = 0.3  # a detection within this box overlap continues an existing track
    duplicate_iou: float = 0.6  # two tracks that converge on one face: the younger one goes
    smoothing: bool = True
    crop_tolerance: float = 0.03  # the FaceMesh crop follows the face only past this move (of its size)
    predict: bool = True  # lead the crop by the face's velocity (off: it stays at the last mesh)
    predict_max_s: float = 0.5  # never extrapolate further than this (a stalled stream, a long gap)
    velocity_gain: float = 0.7  # weight of the newest measured velocity against the previous estimate
    redetect_lost: bool = True  # a face lost on a frame that did not detect: detect on that same frame
    relink_radius: float = 2.0  # a lost face takes the nearest unlinked detection this close (face sizes;
    # 0 = box overlap alone)
    refine_offset: float = 0.25  # a mesh this far off its crop's centre (of its size) is run once more
    # from its own crop (0 = never)
    # One Euro, tuned on FaceMesh's raw points: a still face through VP8 stops shimmering, a pan barely
    # lags, and a moving face's landmarks steady.
    min_cutoff_hz: float = 0.05  # cutoff of a still face
    beta: float = 20.0  # cutoff gain per face-size/s of speed
    d_cutoff_hz: float = 1.0  # cutoff of the speed estimate

    def __post_init__(self) -> None:
        if self.detect_every_frames < 1 or self.detect_every_ms <= 0:
            raise ValueError("detect_every_frames must be >= 1 and detect_every_ms > 0")
        if self.hold_frames < 0:
            raise ValueError("hold_frames must be >= 0")
        if (
            self.predict_max_s < 0
            or not 0.0 < self.velocity_gain <= 1.0
            or self.relink_radius < 0
            or self.refine_offset < 0
        ):
            raise ValueError(
                "predict_max_s, relink_radius and refine_offset must be >= 0 and velocity_gain in (0, 1]"
            )


def _alpha(cutoff_hz: np.ndarray | float, dt: float) -> np.ndarray:
    tau = 1.0 / (2.0 * np.pi * np.asarray(cutoff_hz, dtype=np.float64))
    return np.asarray(1.0 / (1.0 + tau / dt))


@dataclass
class OneEuroFilter:
    """One Euro filter over an (N, 2) point set; speed normalised by `scale` (the face's size in px)."""

    min_cutoff_hz: float
    beta: float
    d_cutoff_hz: float
    x: np.ndarray | None = None
    dx: np.ndarray | None = None
    t: float | None = None

    def __call__(self, points: np.ndarray, t: float, scale: float) -> np.ndarray:
        pts = points.astype(np.float64)
        if self.x is None or self.t is None or self.x.shape != pts.shape:
            self.x, self.dx, self.t = pts, np.zeros_like(pts), t
            return points.astype(np.float32)
        dt = min(max(t - self.t, 1e-3), 0.5)  # a stalled or repeated clock must not freeze or blow up
        self.t = t
        dx = (pts - self.x) / dt / max(scale, 1.0)
        assert self.dx is not None
        dx_hat = self.dx + _alpha(self.d_cutoff_hz, dt) * (dx - self.dx)
        cutoff = self.min_cutoff_hz + self.beta * np.abs(dx_hat)
        x_hat = self.x + _alpha(cutoff, dt) * (pts - self.x)
        self.x, self.dx = x_hat, dx_hat
        return x_hat.astype(np.float32)


@dataclass
class TrackedFace:
    """One face followed across a session's frames."""

    id: int
    raw: Face  # the last mesh as measured (box-overlap linking)
    crop: Face  # the face whose crop seeds the next frame's FaceMesh (moves with hysteresis)
    shown: Face  # smoothed landmarks and the five points derived from them: what is swapped
    filter: OneEuroFilter
    misses: int = 0  # consecutive frames with the mesh lost (held meanwhile)
    age: int = 0
    similarity: float | None = None  # cosine similarity to the session's reference face, when asked
    raw_t: float | None = None  # capture time of `raw`
    velocity: np.ndarray | None = None  # (2,) px/s of the mesh's centre; None until two measurements


def iou(a: np.ndarray, b: np.ndarray) -> float:
    w = max(0.0, float(min(a[2], b[2]) - max(a[0], b[0])))
    h = max(0.0, float(min(a[3], b[3]) - max(a[1], b[1])))
    inter = w * h
    union = float((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1])) - inter
    return inter / union if union > 0 else 0.0


def link(
    track_boxes: Sequence[np.ndarray], detections: Sequence[Face], min_iou: float
) -> tuple[dict[int, int], list[int]]:
    """Greedy box-overlap matching of detections to tracks (each track's box where it is expected now):
    ({detection index: track index}, unmatched detection indices)."""
    pairs = sorted(
        ((iou(box, d.box), ti, di) for ti, box in enumerate(track_boxes) for di, d in enumerate(detections)),
        reverse=True,
    )
    matched: dict[int, int] = {}
    used: set[int] = set()
    for overlap, ti, di in pairs:
        if overlap < min_iou:
            break
        if di in matched or ti in used:
            continue
        matched[di] = ti
        used.add(ti)
    return matched, [di for di in range(len(detections)) if di not in matched]


def link_lost_nearby(
    track_boxes: Sequence[np.ndarray],
    lost: Sequence[int],
    detections: Sequence[Face],
    matched: dict[int, int],
    unmatched: list[int],
    radius: float,
    last_boxes: Sequence[np.ndarray],
) -> list[int]:
    """Second pass for tracks that no detection overlapped (a fast face, or one that turned round, is no
    longer where its velocity put it): each of `lost` takes the nearest detection that linked to nothing, if
    that detection's centre is within `radius` face sizes of where the track was expected (`track_boxes`) or
    last measured (`last_boxes`) and its size is within a factor of 2. Adds to `matched` in place; returns
    the detections still unmatched."""
    taken = set(matched.values())
    pairs: list[tuple[float, int, int]] = []
    for ti in lost:
        if ti in taken:
            continue
        boxes = (track_boxes[ti], last_boxes[ti])
        side = float(max(boxes[0][2] - boxes[0][0], boxes[0][3] - boxes[0][1], 1.0))
        for di in unmatched:
            d = detections[di]
            size = max(d.width, d.height, 1.0)
            cx, cy = (d.box[0] + d.box[2]) / 2, (d.box[1] + d.box[3]) / 2
            dist = min(float(np.hypot(cx - (b[0] + b[2]) / 2, cy - (b[1] + b[3]) / 2)) for b in boxes)
            if dist <= radius * side and 0.5 <= size / side <= 2.0:
                pairs.append((dist, ti, di))
    left = list(unmatched)
    for _, ti, di in sorted(pairs):
        if ti in taken or di not in left:
            continue
        matched[di] = ti
        taken.add(ti)
        left.remove(di)
    return left


def detection_due(
    frames_since: int,
    last_detect_s: float | None,
    now_s: float,
    lost: bool,
    has_faces: bool,
    config: TrackingConfig,
    detect_every: int = 1,
) -> bool:
    """Whether this frame of a tracked session runs the detector (see the module docstring)."""
    if lost or not has_faces or last_detect_s is None:
        return True
    every = max(config.detect_every_frames, detect_every)
    every_s = config.detect_every_ms / 1000.0 * max(detect_every, 1)
    return frames_since + 1 >= every or now_s - last_detect_s >= every_s


def face_size(face: Face) -> float:
    return float(max(face.width, face.height, 1.0))


def measured(face: Face, landmarks: np.ndarray, presence: float) -> Face:
    """A face as its mesh puts it: box = the mesh's extent, five points from the mesh (one point source).
    Every face with landmarks is made here or by `shifted`, so its box IS its mesh's extent: the extent is
    read from the box from then on."""
    return replace(
        face, box=extent(landmarks), kps5=kps5_from_mesh(landmarks), landmarks=landmarks, presence=presence
    )


def new_track(track_id: int, face: Face, t: float, config: TrackingConfig) -> TrackedFace:
    flt = OneEuroFilter(config.min_cutoff_hz, config.beta, config.d_cutoff_hz)
    assert face.landmarks is not None
    flt(face.landmarks, t, face_size(face))
    # the brows' rest starts at the first `update` (a new track is measured again in its first frame)
    return TrackedFace(id=track_id, raw=face, crop=face, shown=face, filter=flt, raw_t=t)


def mesh_center(face: Face) -> np.ndarray:
    """Centre of the mesh's extent (= its box, see `measured`; the detection box for a face without a mesh),
    as float64 (2,)."""
    b = face.box
    return np.array([(b[0] + b[2]) / 2, (b[1] + b[3]) / 2], dtype=np.float64)


def shifted(face: Face, offset: np.ndarray) -> Face:
    """`face` moved by `offset` px (box, five points and mesh alike)."""
    d = offset.astype(np.float32)
    return replace(
        face,
        box=face.box + np.concatenate([d, d]),
        kps5=face.kps5 + d,
        landmarks=None if face.landmarks is None else face.landmarks + d,
    )


def _lead(tf: TrackedFace, t: float | None, config: TrackingConfig) -> np.ndarray | None:
    """How far the face moved since its last measurement, at capture time `t` (px); None when unknown."""
    if not config.predict or t is None or tf.velocity is None or tf.raw_t is None:
        return None
    return tf.velocity * min(max(t - tf.raw_t, 0.0), config.predict_max_s)


def expected_box(tf: TrackedFace, t: float | None, config: TrackingConfig) -> np.ndarray:
    """Where the track's face box is expected at capture time `t` (what a detection is linked against: a
    face that moved more than its own width since its last mesh still links to its track)."""
    offset = _lead(tf, t, config)
    return tf.raw.box if offset is None else tf.raw.box + np.concatenate([offset, offset]).astype(np.float32)


def predicted_crop(tf: TrackedFace, t: float | None, config: TrackingConfig) -> Face:
    """The face whose crop seeds FaceMesh at capture time `t`: the last mesh moved by the track's velocity,
    once that move passes the crop hysteresis; otherwise the hysteresis crop itself (a still face keeps its
    crop, so FaceMesh's own noise is not fed back)."""
    offset = _lead(tf, t, config)
    if offset is None or float(np.hypot(offset[0], offset[1])) <= config.crop_tolerance * face_size(tf.raw):
        return tf.crop
    return shifted(tf.raw, offset)


def off_centre(crop: Face, mesh: Face) -> float:
    """How far `mesh` lies from the centre of the face its crop came from, in `mesh` sizes."""
    return float(np.linalg.norm(mesh_center(mesh) - mesh_center(crop))) / face_size(mesh)


def displayed(tf: TrackedFace, t: float | None, config: TrackingConfig) -> Face:
    """The face to swap at capture time `t`: its smoothed landmarks, or, for a held face (mesh lost this
    frame), the last ones moved on by its velocity: holding a face that moves a face-width per frame in place
    pastes the swap beside the real face."""
    offset = _lead(tf, t, config) if tf.misses else None
    return tf.shown if offset is None else shifted(tf.shown, offset)


def _learn_velocity(tf: TrackedFace, face: Face, t: float, config: TrackingConfig) -> None:
    """Update the track's velocity from its previous measurement (`tf.raw` at `tf.raw_t`) and `face` at `t`.
    A gap longer than `predict_max_s` (or a clock that did not move) forgets it: motion so old says little."""
    dt = None if tf.raw_t is None else t - tf.raw_t
    if dt is None or dt <= 0.0 or dt > config.predict_max_s:
        tf.velocity = None
    else:
        measured_v = (mesh_center(face) - mesh_center(tf.raw)) / dt
        g = config.velocity_gain
        tf.velocity = measured_v if tf.velocity is None else g * measured_v + (1.0 - g) * tf.velocity
    tf.raw_t = t


def crop_moved(old: Face, new: Face, tolerance: float) -> bool:
    """Whether `new`'s mesh moved, grew or turned enough that the FaceMesh crop should follow it."""
    if old.landmarks is None or new.landmarks is None:
        return True
    lo_a, hi_a = old.box[:2], old.box[2:]  # = the meshes' extents (see `measured`)
    lo_b, hi_b = new.box[:2], new.box[2:]
    side = float(max(hi_a - lo_a))
    shift = float(np.linalg.norm((lo_b + hi_b) / 2 - (lo_a + hi_a) / 2))
    grow = abs(float(max(hi_b - lo_b)) - side)

    def angle(f: Face) -> float:
        eyes = f.kps5[:2]
        return float(np.arctan2(eyes[1, 1] - eyes[0, 1], eyes[1, 0] - eyes[0, 0]))

    turn = abs(angle(new) - angle(old))
    return shift > tolerance * side or grow > tolerance * side or turn > tolerance * 1.2


def update(tf: TrackedFace, face: Face, t: float, config: TrackingConfig) -> None:
    """A new measurement of a tracked face: smooth its landmarks, re-derive the five points from them."""
    assert face.landmarks is not None
    dt = 0.0 if tf.raw_t is None else t - tf.raw_t
    _learn_velocity(tf, face, t, config)
    tf.raw, tf.misses, tf.age = face, 0, tf.age + 1
    if crop_moved(tf.crop, face, config.crop_tolerance):
        tf.crop = face
    if config.smoothing:
        smooth = tf.filter(face.landmarks, t, face_size(face))
        shown = measured(face, smooth, face.presence or 0.0)
    else:
        shown = face
    assert shown.landmarks is not None  # the brows' running rest rides on the shown face
    tf.shown = replace(shown, brows_rest=follow_rest(tf.shown.brows_rest, brows_pose(shown.landmarks), dt))


def drop_duplicates(tracks: list[TrackedFace], min_iou: float) -> list[TrackedFace]:
    """Two tracks on one face (a re-detection that did not link): keep the older."""
    kept: list[TrackedFace] = []
    for tf in sorted(tracks, key=lambda t: t.id):
        if all(iou(tf.raw.box, k.raw.box) < min_iou for k in kept):
            kept.append(tf)
    return sorted(kept, key=lambda t: t.id)


def needs_detection(
    track: FaceTrack | None, shape: tuple[int, ...], now_s: float, detect_every: int, config: TrackingConfig
) -> bool:
    """Whether a frame of this session (None = stateless) runs the detector."""
    if track is None or track.frame_shape != shape:
        return True  # stateless, the first frame, or the resolution changed: old tracks mean nothing here
    return detection_due(
        track.frames_since_detect,
        track.last_detect_s,
        now_s,
        track.lost,
        bool(track.faces),
        config,
        detect_every,
    )


def plan_meshes(
    track: FaceTrack,
    shape: tuple[int, ...],
    detections: list[Face] | None,
    config: TrackingConfig,
    t: float | None = None,
) -> list[tuple[Face, TrackedFace | None]]:
    """This frame's FaceMesh jobs for one session: (face whose crop to use, its track or None for a new face).

    Live tracks crop from their last mesh, led by their velocity to capture time `t` (None: not led); a held
    (lost) track waits for a detection that overlaps it and re-seeds its crop; detections that overlap no
    track start new ones. `detections` is None on frames that did not run the detector.
    """
    if track.frame_shape != shape:
        track.faces, track.selected_id = [], None
    reseed: dict[int, Face] = {}
    new = detections or []
    if detections is not None:
        everyone = range(len(track.faces))
        matched, overlapped, unmatched = _link_to_tracks(track, detections, everyone, t, config)
        # held faces restart from their detection; so does a live one no detection overlapped but one near it
        # did (it moved off its crop: its own crop would miss it)
        reseed = {
            ti: detections[di]
            for di, ti in matched.items()
            if track.faces[ti].misses > 0 or di not in overlapped
        }
        new = [detections[di] for di in unmatched]
    jobs: list[tuple[Face, TrackedFace | None]] = []
    for ti, tf in enumerate(track.faces):
        if tf.misses == 0 or ti in reseed:
            jobs.append((reseed[ti] if ti in reseed else predicted_crop(tf, t, config), tf))
    jobs.extend((f, None) for f in new)
    return jobs


def _link_to_tracks(
    track: FaceTrack,
    detections: list[Face],
    searching: Sequence[int],
    t: float | None,
    config: TrackingConfig,
) -> tuple[dict[int, int], dict[int, int], list[int]]:
    """Detections to tracks: by overlap with where each track is expected at `t`, then each track of
    `searching` that no detection overlapped takes the nearest free one (`link_lost_nearby`). Returns
    ({detection: track}, the overlap links alone, unlinked detections)."""
    expected = [expected_box(tf, t, config) for tf in track.faces]
    matched, unmatched = link(expected, detections, config.link_iou)
    overlapped = dict(matched)
    unmatched = link_lost_nearby(
        expected,
        searching,
        detections,
        matched,
        unmatched,
        config.relink_radius,
        [tf.raw.box for tf in track.faces],
    )
    return matched, overlapped, unmatched


def relink_lost(
    track: FaceTrack,
    detections: list[Face],
    updated: set[int],
    config: TrackingConfig,
    t: float | None = None,
) -> list[tuple[Face, TrackedFace | None]]:
    """FaceMesh jobs after a second-chance detection on the frame where a tracked face was lost: detections
    linked to a track not measured this frame (its `id()` not in `updated`) re-seed it; detections linked to
    a face measured this frame are that face again (no job); the rest are new faces."""
    lost = [ti for ti, tf in enumerate(track.faces) if id(tf) not in updated]
    matched, _, unmatched = _link_to_tracks(track, detections, lost, t, config)
    jobs: list[tuple[Face, TrackedFace | None]] = [
        (detections[di], track.faces[ti])
        for di, ti in sorted(matched.items())
        if id(track.faces[ti]) not in updated
    ]
    jobs.extend((detections[di], None) for di in unmatched)
    return jobs


def advance(
    track: FaceTrack,
    shape: tuple[int, ...],
    new_faces: list[Face],
    updated: set[int],
    detected: bool,
    now_s: float,
    t: float,
    config: TrackingConfig,
    max_faces: int | None = None,
) -> list[TrackedFace]:
    """Move a session's track one frame on: hold or drop the faces whose mesh was lost (`updated` holds the
    `id()`s of the tracks measured this frame), start tracks for new faces, book the detection."""
    alive: list[TrackedFace] = []
    lost = False
    for tf in track.faces:
        if id(tf) in updated:
            alive.append(tf)
            continue
        tf.misses += 1
        lost = True
        if tf.misses <= config.hold_frames:
            alive.append(tf)  # held: last landmarks, so one missed frame does not flicker
    for face in new_faces:
        alive.append(new_track(track.next_id, face, t, config))
        track.next_id += 1
    alive = drop_duplicates(alive, config.duplicate_iou)
    if max_faces is not None and len(alive) > max_faces:
        alive = sorted(alive, key=lambda tf: tf.shown.area, reverse=True)[:max_faces]
        alive.sort(key=lambda tf: tf.id)
    track.faces = alive
    track.lost = lost
    track.frame_shape = shape
    if detected:
        track.frames_since_detect, track.last_detect_s = 0, now_s
    else:
        track.frames_since_detect += 1
    return alive
