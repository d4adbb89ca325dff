"""bench/tracking.py on a short clip: every mode measured, the JSON and the contact sheet written."""

from __future__ import annotations

import json
from pathlib import Path

import cv2

from engines.models.store import ModelStore


def _load():  # type: ignore[no-untyped-def]
    import bench.tracking

    return bench.tracking


def test_bench_tracking_writes_every_mode_and_a_contact_sheet(
    tmp_path: Path, model_store: ModelStore, media_dir: Path
) -> None:
    bench = _load()
    out, sheet = tmp_path / "t.json", tmp_path / "t.png"
    rc = bench.main(
        [
            "--clips",
            "glide 640x360",
            "--strides",
            "2",
            "--frames",
            "60",
            "--media-dir",
            str(media_dir),
            "--output",
            str(out),
            "--contact-sheet",
            str(sheet),
        ]
    )
    assert rc == 0
    rows = json.loads(out.read_text())["results"]
    assert [r["tracking"] for r in rows] == list(bench.MODES)
    default, _, before = rows
    assert default["processed"] == before["processed"] == 30
    assert default["lost_share"] == 0.0 and before["lost_share"] > 0.5  # every 2nd frame of the glide
    assert default["paste_error_pct_mean"] < 10.0 < before["paste_error_pct_mean"]
    image = cv2.imread(str(sheet))
    assert image is not None and image.shape[0] > 3 * 2 * 60  # one row per mode
