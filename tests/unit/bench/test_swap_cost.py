"""bench.swap_cost: two workers on this tree, interleaved, read their faces' fastest calls; bad arguments get
a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.swap_cost import main

ROOT = Path(__file__).resolve().parents[3]


def test_the_same_tree_twice_reads_a_cost_per_face_for_each(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    assert main(["--trees", str(ROOT), str(ROOT), "--blocks", "2", "--passes", "1", "--frames", "3",
                 "--size", "320x240", "--output", str(out)]) == 0  # fmt: skip
    report = json.loads(out.read_text())
    assert report["faces"] >= 1 and report["blocks"] == 2 and len(report["progress_ms_per_face"]) == 2
    first, second = report["trees"]
    assert first["path"] == second["path"] == str(ROOT)
    assert first["ms_per_face"] > 0 and second["ms_per_face"] > 0
    assert first["over_first_ms"] == 0
    # the minima only fall as blocks go by
    assert all(b <= a for a, b in zip(*report["progress_ms_per_face"], strict=True))


@pytest.mark.parametrize(
    "args",
    [
        ["--trees", str(ROOT)],
        ["--trees", str(ROOT), "/nonexistent"],
        ["--trees", str(ROOT), str(ROOT), "--blocks", "0"],
        ["--trees", str(ROOT), str(ROOT), "--size", "big"],
    ],
)
def test_bad_arguments_get_a_one_line_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
