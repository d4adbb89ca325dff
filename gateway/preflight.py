"""Checks the CLI runs before listening: a machine that cannot run the configured backend fails in one line.

Why before listening: models load in the background after the server starts (liveness answers at once,
readiness waits for warm-up); a missing GPU found there would leave a live-but-never-ready process. These
checks are cheap (no model is loaded) and raise `PreflightError` with a one-line reason and the install hint.
"""

from __future__ import annotations

from gateway.config import ProcessingConfig


class PreflightError(RuntimeError):
    """This machine cannot run the configured processing; str() is one line."""


def check_processing(proc: ProcessingConfig) -> None:
    """Raise PreflightError when the configured engine or ONNX Runtime providers are not usable here."""
    from engines.engine import EngineError

    try:
        if proc.engine == "triton":
            from engines.triton_engine import import_client

            import_client()  # the client library; the server's readiness is /readyz's business
        elif proc.engine == "tensorrt":
            from engines.tensorrt_engine import device_compute_capability

            # imports TensorRT and cuda-python, asks the driver for the GPU
            device_compute_capability(proc.device_id)
        else:
            import onnxruntime as ort

            from engines.onnxruntime_engine import check_available, resolve_providers

            check_available(resolve_providers(proc.providers), ort.get_available_providers())
    except EngineError as exc:
        what = f"--engine {proc.engine} --providers {','.join(proc.providers)}"
        raise PreflightError(f"{what}: {exc}") from None
    except Exception as exc:  # a broken driver or library: still one line, never a traceback
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise PreflightError(f"--engine {proc.engine}: GPU check failed: {reason}") from None
