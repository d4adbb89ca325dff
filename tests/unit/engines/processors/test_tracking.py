"""Tracking policy without models: when to detect, box-overlap linking, holding and dropping lost faces."""

from __future__ import annotations

import numpy as np

from engines.frames import FaceTrack
from engines.processors.face_detector import Face
from engines.processors.tracking import (
    TrackingConfig,
    advance,
    detection_due,
    displayed,
    expected_box,
    link,
    link_lost_nearby,
    measured,
    mesh_center,
    needs_detection,
    plan_meshes,
    relink_lost,
    shifted,
    update,
)

CFG = TrackingConfig(detect_every_frames=10, detect_every_ms=1000.0, hold_frames=2)


def _face(x: float, y: float, side: float = 60.0) -> Face:
    """A face whose 'mesh' is a grid over its box (enough for boxes, crops and five points)."""
    gx, gy = np.meshgrid(np.linspace(x, x + side, 22), np.linspace(y, y + side, 22))
    pts = np.stack([gx.ravel(), gy.ravel()], 1)[:468].astype(np.float32)
    base = Face(
        box=np.array([x, y, x + side, y + side], np.float32), score=1.0, kps5=np.zeros((5, 2), np.float32)
    )
    return measured(base, pts, 0.9)


def test_detection_schedule() -> None:
    assert detection_due(0, None, 0.0, False, True, CFG)  # never detected
    assert detection_due(3, 0.0, 0.2, False, False, CFG)  # nothing tracked: look every frame
    assert detection_due(3, 0.0, 0.2, True, True, CFG)  # a face was lost
    assert not detection_due(3, 0.0, 0.2, False, True, CFG)
    assert detection_due(9, 0.0, 0.5, False, True, CFG)  # K frames
    assert detection_due(2, 0.0, 1.0, False, True, CFG)  # T ms
    assert not detection_due(9, 0.0, 0.5, False, True, CFG, detect_every=20)  # degradation: only longer
    assert needs_detection(None, (240, 320), 0.0, 1, CFG)  # stateless
    track = FaceTrack(frame_shape=(240, 320), faces=[object()], last_detect_s=0.0)
    assert not needs_detection(track, (240, 320), 0.1, 1, CFG)
    assert needs_detection(track, (360, 640), 0.1, 1, CFG)  # resolution changed


def test_link_by_overlap() -> None:
    track = FaceTrack()
    advance(track, (240, 320), [_face(10, 10), _face(200, 10)], set(), True, 0.0, 0.0, CFG)
    matched, new = link([tf.raw.box for tf in track.faces], [_face(205, 12), _face(100, 150)], CFG.link_iou)
    assert matched == {0: 1} and new == [1]


def test_lost_face_is_held_then_dropped_and_reseeded_by_a_detection() -> None:
    track = FaceTrack()
    shape = (240, 320)
    advance(track, shape, [_face(10, 10)], set(), True, 0.0, 0.0, CFG)
    tf = track.faces[0]
    assert [f is tf.crop for f, _ in plan_meshes(track, shape, None, CFG)] == [True]
    advance(track, shape, [], set(), False, 0.1, 0.1, CFG)  # mesh lost: held, detect next
    assert track.faces == [tf] and tf.misses == 1 and track.lost
    assert plan_meshes(track, shape, None, CFG) == []  # held: no crop to try alone
    again = _face(14, 12)
    jobs = plan_meshes(track, shape, [again], CFG)
    assert jobs == [(again, tf)]  # re-seeded from the detection
    advance(track, shape, [], set(), True, 0.2, 0.2, CFG)
    advance(track, shape, [], set(), False, 0.3, 0.3, CFG)
    assert track.faces == []  # gone after the hold
    assert track.frames_since_detect == 1 and track.last_detect_s == 0.2


def _moving_track(speed_px_s: float, config: TrackingConfig = CFG) -> FaceTrack:
    """One face measured at x=10 (t=0) and x=10+speed/10 (t=0.1)."""
    track = FaceTrack()
    shape = (240, 640)
    advance(track, shape, [_face(10, 10)], set(), True, 0.0, 0.0, config)
    tf = track.faces[0]
    update(tf, _face(10 + speed_px_s * 0.1, 10), 0.1, config)
    advance(track, shape, [], {id(tf)}, False, 0.1, 0.1, config)
    return track


def test_crop_leads_a_moving_face_and_stays_put_for_a_still_one() -> None:
    track = _moving_track(300.0)  # 30 px per 0.1 s
    tf = track.faces[0]
    assert tf.velocity is not None and np.allclose(tf.velocity, [300.0, 0.0])
    ((crop, owner),) = plan_meshes(track, (240, 640), None, CFG, t=0.2)
    assert owner is tf
    assert np.allclose(mesh_center(crop), mesh_center(tf.raw) + [30.0, 0.0], atol=1e-3)  # led by v * dt
    ((crop, _),) = plan_meshes(track, (240, 640), None, CFG)  # no capture time: not led
    assert crop is tf.crop
    off = TrackingConfig(detect_every_frames=10, detect_every_ms=1000.0, hold_frames=2, predict=False)
    ((crop, _),) = plan_meshes(_moving_track(300.0, off), (240, 640), None, off, t=0.2)
    assert np.allclose(mesh_center(crop), mesh_center(_face(40, 10)), atol=1e-3)  # the last mesh

    still = _moving_track(5.0)  # 0.5 px per 0.1 s: noise, not motion
    ((crop, _),) = plan_meshes(still, (240, 640), None, CFG, t=0.2)
    assert crop is still.faces[0].crop  # the hysteresis crop, untouched


def test_a_lost_fast_face_relinks_to_its_own_track_where_it_is_expected() -> None:
    track = _moving_track(600.0)  # 60 px (a face width) per 0.1 s
    tf = track.faces[0]
    advance(track, (240, 640), [], set(), False, 0.2, 0.2, CFG)  # mesh lost at t=0.2: held
    assert tf.misses == 1 and track.lost
    found = _face(10 + 600.0 * 0.3, 10)  # the detector finds it at t=0.3
    assert link([tf.raw.box], [found], CFG.link_iou) == ({}, [0])  # no overlap with its last mesh
    jobs = plan_meshes(track, (240, 640), [found], CFG, t=0.3)
    assert jobs == [(found, tf)]  # same track, same filter and id
    off = TrackingConfig(
        detect_every_frames=10, detect_every_ms=1000.0, hold_frames=2, predict=False, relink_radius=0.0
    )
    assert plan_meshes(track, (240, 640), [found], off, t=0.3) == [(found, None)]  # a new track


def test_a_lost_face_that_turned_round_takes_the_nearest_free_detection() -> None:
    track = _moving_track(600.0)  # expected further right...
    tf = track.faces[0]
    advance(track, (240, 640), [], set(), False, 0.2, 0.2, CFG)
    back = _face(100, 14)  # ...but it turned back left
    other = _face(400, 10)  # someone else, far away
    small = _face(90, 10, side=20.0)  # near, but a third of its size
    assert plan_meshes(track, (240, 640), [other, small, back], CFG, t=0.3) == [
        (back, tf),
        (other, None),
        (small, None),
    ]
    boxes = [expected_box(tf, 0.3, CFG)]
    matched, left = link(boxes, [back], CFG.link_iou)
    assert matched == {}
    # measured from the expected box alone here (it is also the "last" box): 90 px away
    assert link_lost_nearby(boxes, [0], [back], matched, left, 1.0, boxes) == [0]  # too far for 1 size
    assert link_lost_nearby(boxes, [0], [back], matched, left, CFG.relink_radius, boxes) == []
    assert matched == {0: 0}


def test_second_look_reseeds_only_faces_not_measured_this_frame() -> None:
    track = FaceTrack()
    advance(track, (240, 640), [_face(10, 10), _face(300, 10)], set(), True, 0.0, 0.0, CFG)
    lost, measured_now = track.faces  # the mesh found only the second
    again, newcomer = _face(16, 12), _face(500, 100)
    jobs = relink_lost(track, [_face(302, 10), again, newcomer], {id(measured_now)}, CFG, 0.1)
    assert jobs == [(again, lost), (newcomer, None)]  # the measured face is not redone


def test_velocity_is_forgotten_after_a_long_gap() -> None:
    track = _moving_track(300.0)
    tf = track.faces[0]
    update(tf, _face(200, 10), 0.1 + CFG.predict_max_s + 0.1, CFG)  # next measurement after a stall
    assert tf.velocity is None
    ((crop, _),) = plan_meshes(track, (240, 640), None, CFG, t=2.0)
    assert crop is tf.crop


def test_a_held_face_is_shown_where_it_is_expected_not_where_it_was() -> None:
    track = _moving_track(300.0)
    tf = track.faces[0]
    assert displayed(tf, 0.2, CFG) is tf.shown  # measured this frame: as smoothed
    advance(track, (240, 640), [], set(), False, 0.2, 0.2, CFG)  # mesh lost at t=0.2: held
    held = displayed(tf, 0.2, CFG)
    assert np.allclose(mesh_center(held), mesh_center(tf.shown) + [30.0, 0.0], atol=1e-3)
    off = TrackingConfig(detect_every_frames=10, detect_every_ms=1000.0, hold_frames=2, predict=False)
    assert displayed(tf, 0.2, off) is tf.shown  # not led: held in place


def test_a_face_that_reversed_is_relinked_near_where_it_was_last_measured() -> None:
    track = _moving_track(600.0)  # last mesh at x=70, expected at 190
    tf = track.faces[0]
    advance(track, (240, 640), [], set(), False, 0.2, 0.2, CFG)
    reversed_face = _face(60, 12)  # 130 px from where it was expected
    assert plan_meshes(track, (240, 640), [reversed_face], CFG, t=0.3) == [(reversed_face, tf)]


def test_a_live_face_that_left_its_crop_restarts_from_the_detection_near_it() -> None:
    track = _moving_track(0.0)  # still at x=10: no lead
    tf = track.faces[0]
    moved = _face(80, 10)  # the detector finds it 70 px on
    assert plan_meshes(track, (240, 640), [moved], CFG, t=0.2) == [(moved, tf)]  # re-seeded, same track
    overlapping = _face(14, 10)
    assert plan_meshes(track, (240, 640), [overlapping], CFG, t=0.2) == [(tf.crop, tf)]  # its own crop


def test_a_meshed_face_box_is_its_mesh_extent_also_when_moved() -> None:
    """mesh_center and crop_moved read a mesh's extent from its box: measured() and shifted() keep it so."""
    rng = np.random.default_rng(0)
    pts = (rng.random((468, 2)) * 80 + 20).astype(np.float32)
    base = Face(box=np.zeros(4, np.float32), score=1.0, kps5=np.zeros((5, 2), np.float32))
    face = measured(base, pts, 0.9)
    assert np.array_equal(face.box, [*pts.min(0), *pts.max(0)])
    moved = shifted(face, np.array([12.5, -3.0]))
    assert moved.landmarks is not None
    assert np.allclose(moved.box, [*moved.landmarks.min(0), *moved.landmarks.max(0)], atol=1e-4)
    assert np.allclose(mesh_center(moved), (moved.landmarks.min(0) + moved.landmarks.max(0)) / 2, atol=1e-4)


def test_the_shown_face_carries_the_brows_rest_which_follows_slowly() -> None:
    from engines.processors.face_expression import brows_pose
    from engines.source.expression import BROW_LEFT, BROW_RIGHT

    still = _face(50, 50)
    assert still.landmarks is not None
    rest = brows_pose(still.landmarks)
    raised_pts = still.landmarks.copy()
    raised_pts[list(BROW_RIGHT) + list(BROW_LEFT), 1] -= 4.0  # both brows up
    raised = measured(still, raised_pts, 0.9)
    track = FaceTrack()
    cfg = TrackingConfig(smoothing=False)
    advance(track, (240, 320), [still], set(), True, 0.0, 0.0, cfg)
    tf = track.faces[0]
    assert tf.shown.brows_rest is None  # new: at rest by definition
    update(tf, still, 0.0, cfg)
    assert tf.shown.brows_rest is not None and np.allclose(tf.shown.brows_rest, rest)
    t = 0.0
    for _ in range(10):  # a third of a second with the brows up: the rest barely moves
        t += 1 / 30
        update(tf, raised, t, cfg)
    assert tf.shown.brows_rest is not None
    moved = np.abs(tf.shown.brows_rest - rest).max()
    raise_size = np.abs(brows_pose(raised_pts) - rest).max()
    assert 0 < moved < 0.15 * raise_size
    for _ in range(30 * 30):  # held for half a minute: the raise is the rest now
        t += 1 / 30
        update(tf, raised, t, cfg)
    assert tf.shown.brows_rest is not None
    assert np.abs(tf.shown.brows_rest - brows_pose(raised_pts)).max() < 0.01 * raise_size
