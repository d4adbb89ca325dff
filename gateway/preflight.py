"""Checks the CLI runs before listening: a machine that cannot run the configured backend fails in one line.

Why before listening: models load in the background after the server starts (liveness answers at once,
readiness waits for warm-up); a missing GPU found there would leave a live-but-never-ready process. These
checks are cheap (no model is loaded) and raise `PreflightError` with a one-line reason and the install hint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engines.factory import EngineConfig


class PreflightError(RuntimeError):
    """This machine cannot run the configured processing; str() is one line."""


def check_engine(engine: EngineConfig) -> None:
    """Raise PreflightError when the configured engine or ONNX Runtime providers are not usable here."""
    from engines.engine import EngineError

    try:
        if engine.backend == "triton":
            from engines.backends.triton_engine import import_client

            import_client()  # the client library; the server's readiness is /readyz's business
        elif engine.backend == "tensorrt":
            from engines.backends.tensorrt_engine import device_compute_capability

            # imports TensorRT and cuda-python, asks the driver for the GPU
            device_compute_capability(engine.device_id)
        elif engine.backend == "torch":
            check_torch(engine.providers, engine.device_id)
        else:
            import onnxruntime as ort

            from engines.backends.onnxruntime_engine import check_available, resolve_providers

            check_available(resolve_providers(engine.providers), ort.get_available_providers())
    except EngineError as exc:
        what = f"--engine {engine.backend} --providers {','.join(engine.providers)}"
        raise PreflightError(f"{what}: {exc}") from None
    except Exception as exc:  # a broken driver or library: still one line, never a traceback
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise PreflightError(f"--engine {engine.backend}: GPU check failed: {reason}") from None


def check_torch(providers: tuple[str, ...], device_id: int) -> None:
    """torch and onnx2torch import; with `cuda`, torch sees the device (ONNX Runtime's providers do not
    matter to this backend: a CPU-only onnxruntime beside CUDA torch is a working setup)."""
    from engines.backends.torch_engine import import_torch
    from engines.engine import EngineError
    from engines.factory import EngineConfig, torch_config_of

    config = torch_config_of(EngineConfig(backend="torch", providers=providers, device_id=device_id))
    torch, _ = import_torch()
    if config.device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count <= device_id:
            raise EngineError(
                f"torch {torch.__version__} sees {count} CUDA device(s), device {device_id} asked"
            )
