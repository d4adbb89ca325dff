"""tests/gpu skips per test by what it needs: a torch-only GPU machine runs the torch tests."""

from __future__ import annotations

import pytest

from tests.harness.gpu_needs import skip_reason


def test_a_machine_with_torch_cuda_and_no_tensorrt_runs_the_torch_tests() -> None:
    have = {
        "cuda": None,
        "torch_cuda": None,
        "tensorrt": "needs TensorRT",
        "ort_gpu": "needs onnxruntime-gpu",
    }
    assert skip_reason(["torch_cuda"], have.__getitem__) is None
    assert skip_reason([], have.__getitem__) is None  # no declared need: any CUDA device
    assert skip_reason(["tensorrt"], have.__getitem__) == "needs TensorRT"
    assert skip_reason(["torch_cuda", "ort_gpu"], have.__getitem__) == "needs onnxruntime-gpu"
    with pytest.raises(ValueError, match="unknown GPU test need"):
        skip_reason(["tensorrt10"], have.__getitem__)


@pytest.mark.slow  # a pytest run in a subprocess: about 3 s
def test_gpu_tests_skip_with_their_own_reasons() -> None:
    """Run tests/gpu here: the torch tests are skipped for torch's reason (or run, on a CUDA machine), the
    TensorRT ones for TensorRT's; a missing TensorRT no longer skips everything."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    from tests.harness.gpu_needs import probe

    if probe("torch_cuda") is None or probe("tensorrt") is None:
        pytest.skip("this machine runs GPU tests; their skips are not what is checked here")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(root / "tests" / "gpu")],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    skips = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    torch_reason, trt_reason = str(probe("torch_cuda")), str(probe("tensorrt"))
    assert any("test_torch_cuda.py" in s and torch_reason in s for s in skips), proc.stdout
    assert any("test_tensorrt_engine.py" in s and trt_reason in s for s in skips), proc.stdout
    assert not any("test_torch_cuda.py" in s and trt_reason in s for s in skips), proc.stdout
