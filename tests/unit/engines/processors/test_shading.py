"""The target's light on the source's skin (engines.processors.shading), on the host and on torch's CPU
device: the target's low frequencies on the source's detail, lids keeping their colour relative to the skin,
a dark brow staying neutral on a paler face, each device step equal to the host's; and a ragged coverage
(culled triangles) fading without a step."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engines.pipeline import Pipeline
from engines.processors.masks import skin_weight
from engines.processors.paste import fade_in, feather
from engines.processors.shading import relight


@pytest.fixture(scope="module")
def astronaut_mesh(pipeline: Pipeline, astronaut: np.ndarray) -> np.ndarray:
    face = pipeline.prepare_source(astronaut, "astronaut").prepared.face
    assert face.landmarks is not None
    return np.asarray(face.landmarks, np.float64)


def test_relight_puts_the_targets_low_frequencies_on_the_sources_detail() -> None:
    rng = np.random.default_rng(3)
    h = w = 120
    xs = np.linspace(0.0, 1.0, w, dtype=np.float32)[None, :, None]
    detail = cv2.GaussianBlur(rng.normal(0, 12, (h, w, 3)).astype(np.float32), (0, 0), 1.0)
    # the source lit from the right, the target from the left, in another skin tone
    warped = np.clip(np.array([200, 160, 140], np.float32) * (0.5 + 0.5 * xs) + detail, 0, 255)
    lit = np.array([150, 110, 80], np.float32) * (1.0 - 0.6 * xs)
    target = np.ascontiguousarray(np.broadcast_to(np.clip(lit, 0, 255), (h, w, 3)).astype(np.uint8))
    skin = np.ones((h, w), bool)
    out = relight(warped, target, skin, float(w))

    def low(x: np.ndarray) -> np.ndarray:
        return np.asarray(cv2.GaussianBlur(x.astype(np.float32), (0, 0), 12.0))

    # its low frequencies are the target's, not the source's, away from the border
    inner = (slice(20, -20), slice(20, -20))
    tgt = low(target.astype(np.float32))
    after, before = np.abs(low(out) - tgt)[inner].mean(), np.abs(low(warped) - tgt)[inner].mean()
    assert after < 0.2 * before, (after, before)
    # and it keeps the source's detail
    hp_out, hp_src = out - low(out), warped - low(warped)
    corr = np.corrcoef(hp_out[inner].ravel(), hp_src[inner].ravel())[0, 1]
    assert corr > 0.8, corr


def test_relight_keeps_the_lids_colour_relative_to_the_skin() -> None:
    h = w = 100
    warped = np.zeros((h, w, 3), np.float32) + np.array([220, 180, 160], np.float32)
    warped[40:50, 30:70] = (190, 130, 110)  # brown eye make-up, not skin
    target = np.zeros((h, w, 3), np.uint8) + np.array([180, 130, 105], np.uint8)  # darker, warmer skin
    skin = np.ones((h, w), bool)
    skin[34:56, 24:76] = False  # the lids weigh nothing in the match
    out = relight(warped, target, skin, float(w))

    def ab(rgb: np.ndarray) -> np.ndarray:
        return np.asarray(cv2.cvtColor(rgb.astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB))[..., 1:]

    src, got = ab(warped), ab(np.clip(out, 0, 255))
    want = src[45, 50] - src[10, 50]
    have = got[45, 50] - got[10, 50]
    assert np.linalg.norm(have - want) < 4.0, (have, want)
    # and the skin took the target's colour
    assert np.linalg.norm(got[10, 50] - ab(target)[10, 50]) < 2.0


def test_a_dark_brow_from_a_warm_dark_face_stays_neutral_on_a_pale_one() -> None:
    """The source's brow is as far from its brown skin's colour as near-black is; on a pale target that
    distance, added as it was, would turn the brow teal. Scaled by the skins' chroma it stays neutral."""
    h = w = 100
    warped = np.zeros((h, w, 3), np.float32) + np.array([150, 100, 72], np.float32)  # warm, dark skin
    warped[40:48, 25:75] = (46, 40, 38)  # a near-black brow
    target = np.zeros((h, w, 3), np.uint8) + np.array([222, 205, 196], np.uint8)  # pale, little chroma
    skin = np.ones((h, w), bool)
    skin[34:54, 19:81] = False
    out = relight(warped, target, skin, float(w))
    lab = cv2.cvtColor(np.clip(out, 0, 255).astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)
    src = cv2.cvtColor(warped / 255.0, cv2.COLOR_RGB2LAB)
    brow, cheek = lab[44, 50], lab[10, 50]
    assert brow[0] < cheek[0] - 30  # still a dark brow
    assert brow[1] > -1.0 and brow[2] > -1.0, brow  # not green, not blue: no teal
    # its colour beside the skin's scaled down with the skin's chroma (here to about a third)
    assert np.linalg.norm(brow[1:] - cheek[1:]) < 0.5 * np.linalg.norm(src[44, 50, 1:] - src[10, 50, 1:])


def test_a_sharper_target_raises_the_sources_features_not_its_grain() -> None:
    """Against a more contrasted target the source's detail is raised to its contrast, but only what is
    coarser than grain: the source's noise keeps its own strength."""
    rng = np.random.default_rng(7)
    h = w = 160
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    features = 10.0 * np.sin(xs / 9.0) * np.sin(ys / 11.0)  # folds and creases, ~10 % of the face apart
    grain = rng.normal(0, 4.0, (h, w)).astype(np.float32)  # pixel noise
    warped = np.clip(np.float32(150) + (features + grain)[:, :, None], 0, 255) * np.ones(3, np.float32)
    target = np.clip(np.float32(140) + 3.0 * features[:, :, None] * np.ones(3, np.float32), 0, 255)
    skin = np.ones((h, w), bool)
    out = relight(warped.astype(np.float32), target.astype(np.uint8), skin, float(w))

    def bands(rgb: np.ndarray) -> tuple[float, float]:
        light = cv2.cvtColor(np.clip(rgb, 0, 255).astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)[:, :, 0]
        smooth = cv2.GaussianBlur(light, (0, 0), 1.6)
        inner = (slice(20, -20), slice(20, -20))
        return float((light - smooth)[inner].std()), float(
            (smooth - cv2.GaussianBlur(light, (0, 0), 12.0))[inner].std()
        )

    (fine_in, coarse_in), (fine_out, coarse_out) = bands(warped), bands(out)
    assert coarse_out > 1.5 * coarse_in, (coarse_in, coarse_out)  # the features take the target's contrast
    assert fine_out < 1.15 * fine_in, (fine_in, fine_out)  # the grain does not


def test_the_sources_shading_fades_out_toward_the_pastes_edge() -> None:
    """A source cheek darkening toward the paste's edge (its own light) meets an evenly lit target: with the
    paste's mask the rim takes the target's light, while a fine feature inside the face keeps its detail."""
    h = w = 120
    target = np.full((h, w, 3), (190, 150, 130), np.uint8)
    xs = np.arange(w, dtype=np.float32)
    rim = 45.0 * np.exp(-(xs - 10.0).clip(0) / 10.0)  # the cheek darkens over its last 10-20 px
    warped = np.repeat((target.astype(np.float32) - rim[None, :, None])[None, 0], h, axis=0)
    warped[55:65, 55:65] -= 30.0  # a feature inside the face
    paste = np.zeros((h, w), np.float32)
    paste[8:112, 8:112] = 1.0
    paste = cv2.GaussianBlur(paste, (0, 0), 2.5)
    skin = paste > 0.5
    plain = relight(warped, target, skin, float(w))
    faded = relight(warped, target, skin, float(w), paste)
    flat = target[0, 0].astype(np.float32)
    band = (slice(30, 90), slice(8, 16))  # the paste's edge zone (its mask 0.6 to 1)
    before = np.abs(plain[band] - flat).mean()
    after = np.abs(faded[band] - flat).mean()
    # its coarser part taken out (about 20 of 45 grey levels at the edge; the finer ramp is detail and stays)
    assert before > 15.0 and after < 0.7 * before, (before, after)
    centre = (slice(50, 70), slice(50, 70))
    assert np.abs(faded[centre] - plain[centre]).max() < 1.0  # the feature and its surround as they were
    # the feature still stands out of the skin as much as it did
    depth = float(faded[45:50, 58:62].mean() - faded[58:62, 58:62].mean())
    assert abs(depth - float(plain[45:50, 58:62].mean() - plain[58:62, 58:62].mean())) < 1.0


def test_device_relight_matches_the_host() -> None:
    torch = pytest.importorskip("torch")
    from engines.processors.tensor_shading import relight as device_relight

    rng = np.random.default_rng(5)
    h, w = 130, 110
    base = cv2.GaussianBlur(rng.uniform(60, 220, (h, w, 3)).astype(np.float32), (0, 0), 9.0)
    warped = np.clip(base + rng.normal(0, 6, (h, w, 3)), 0, 255).astype(np.float32)
    skin = np.ones((h, w), bool)
    skin[40:60, 20:90] = False
    # a flatter target (the source's detail lowered) and a more contrasted one (raised, its grain not)
    paste = np.zeros((h, w), np.float32)
    paste[6:124, 8:100] = 1.0
    paste = cv2.GaussianBlur(paste, (0, 0), 2.5)
    rimmed = warped - (40.0 * np.exp(-np.arange(w, dtype=np.float32) / 12.0))[None, :, None]  # a dark rim
    # a flatter target (the source's detail lowered) and a more contrasted one (raised, its grain not), each
    # without and with the paste's mask (the source's shading faded toward its edge)
    for target in (base[::-1] * 0.8 + 20, (base[::-1] - 128.0) * 1.8 + 128.0):
        target = np.clip(target, 0, 255).astype(np.uint8)
        for source, mask in ((warped, None), (rimmed, paste)):
            want = relight(source, target, skin, 120.0, mask)
            got = device_relight(
                torch.from_numpy(source),
                torch.from_numpy(target),
                torch.from_numpy(skin),
                120.0,
                None if mask is None else torch.from_numpy(mask),
            )
            diff = np.abs(got.numpy() - want)
            assert diff.mean() < 1.0 and np.percentile(diff, 99) < 4.0, (diff.mean(), np.percentile(diff, 99))
    faded = relight(rimmed, target, skin, 120.0, paste)
    assert np.abs(faded - relight(rimmed, target, skin, 120.0)).max() > 5  # the rim was there to fade


def test_device_skin_weight_matches_the_host(astronaut_mesh: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    from engines.processors.tensor_shading import skin_weight as device_skin_weight

    lo = np.floor(astronaut_mesh.min(0)) - 4
    local = astronaut_mesh - lo
    h, w = (np.ceil(local.max(0)) + 4).astype(int)[::-1]
    size = float(np.ptp(local, axis=0).max())
    want = skin_weight((int(h), int(w)), local, size)
    got = device_skin_weight(int(h), int(w), local, size, torch.device("cpu")).numpy()
    assert (got != want).mean() < 0.03  # edge pixels of the rings, grown


def test_a_ragged_coverage_fades_without_a_step() -> None:
    # the covered region of a turned face: steps where triangles were culled
    covered = np.zeros((60, 90), bool)
    for k in range(0, 60, 6):
        covered[k : k + 6, : 40 + (k // 6) % 2 * 8] = True
    erode, blur = 2, 3.0
    old = feather(covered, erode, blur) * covered
    new = fade_in(covered, erode)
    assert new[~covered].max() < 0.01  # nothing where the warp has no pixels
    assert new[covered].max() > 0.99  # full strength inside

    # on the covered side of its ragged edge the mask starts from nothing: no step to the target's pixels
    edge = covered & (cv2.dilate((~covered).view(np.uint8), np.ones((3, 3), np.uint8)) > 0)
    assert new[edge].max() < 0.5 * old[edge].max(), (old[edge].max(), new[edge].max())
