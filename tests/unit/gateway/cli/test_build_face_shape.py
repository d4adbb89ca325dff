"""The face-shape setting at the CLI edge: --face-shape and the TOML key reach the processing config and
the pipeline's defaults; a bad value is one stderr line and exit code 2."""

from __future__ import annotations

import pytest

from engines.frames import FaceSettings
from engines.pipeline_config import PipelineConfig
from gateway.cli import build_config, build_parser, main


def test_flag_and_file_set_the_default_shape() -> None:
    assert build_config(build_parser().parse_args([])).pipeline.shape == 1.0
    assert build_config(build_parser().parse_args(["--face-shape", "0.25"])).pipeline.shape == 0.25
    assert build_config(build_parser().parse_args([]), {"face_shape": 0}).pipeline.shape == 0.0


@pytest.mark.parametrize("value", ["2", "-0.5", "nan", "abc"])
def test_bad_shape_is_one_line_and_exit_2(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--face-shape", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gateway: error: ") and "shape" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("value", [1.5, -1.0, float("nan"), True])
def test_config_and_settings_refuse_out_of_range(value: float) -> None:
    with pytest.raises(ValueError, match="shape"):
        PipelineConfig(shape=value)
    with pytest.raises(ValueError, match="shape"):
        FaceSettings(shape=value)
