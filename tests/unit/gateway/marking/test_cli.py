"""`livefuse-mark detect` (gateway.marking.cli) on real files: a marked H.264 clip is found, with its payload
when given the key; an unmarked one is not; a file that is not a video is one line and exit 2."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from engines.marking.embed import Embedder
from engines.marking.pattern import Payload, coefficients, key_id
from gateway.marking.cli import main

KEY = b"mark key for the cli test, 32 b."
FPS = 15


def _write(path: Path, astronaut: np.ndarray, key: bytes | None, seconds: int = 2) -> None:
    face = cv2.resize(astronaut, (300, 300))
    embedder = Embedder(*coefficients(key, Payload(key_id(key), 77, 1234) if key else None)) if key else None
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 640, 360, "yuv420p"
        stream.bit_rate = 600_000
        stream.options = {"preset": "ultrafast"}
        for k in range(seconds * FPS):
            rgb = np.full((360, 640, 3), (90, 110, 140), np.uint8)
            rgb[30:330, 60 + 6 * k : 360 + 6 * k] = face
            i420 = cv2.cvtColor(rgb, cv2.COLOR_RGB2YUV_I420)
            if embedder is not None:
                embedder.mark(i420[:360])
            frame = av.VideoFrame.from_ndarray(i420, format="yuv420p")
            frame.pts, frame.time_base = k, Fraction(1, FPS)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory, astronaut: np.ndarray) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("clips")
    paths = {"marked": root / "marked.mp4", "plain": root / "plain.mp4", "key": root / "mark.key"}
    _write(paths["marked"], astronaut, KEY)
    _write(paths["plain"], astronaut, None)
    paths["key"].write_bytes(KEY + b"\n")
    return paths


def test_marked_clip_is_found_and_its_payload_read_with_the_key(
    clips: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["detect", str(clips["marked"]), "--json"]) == 0
    public = json.loads(capsys.readouterr().out)
    assert public["detected"] is True and public["seconds"] == 2 and public["seconds_detected"] == 2
    assert public["payload"] is None
    assert main(["detect", str(clips["marked"]), "--json", "--key-file", str(clips["key"])]) == 0
    keyed = json.loads(capsys.readouterr().out)
    assert keyed["payload"] == {"key_id": key_id(KEY), "session_code": 77, "time_code": 1234}
    assert main(["detect", str(clips["marked"])]) == 0
    assert "SYNTHETIC" in capsys.readouterr().out


def test_unmarked_clip_is_not_found(clips: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["detect", str(clips["plain"]), "--json", "--key-file", str(clips["key"])]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["detected"] is False and report["seconds_detected"] == 0 and report["payload"] is None


def test_a_file_that_is_no_video_is_one_line_and_exit_2(
    clips: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["detect", str(clips["key"])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("livefuse-mark: ") and err.count("\n") == 1
    assert main(["detect", str(clips["marked"]), "--key-file", "/nonexistent/key"]) == 2
