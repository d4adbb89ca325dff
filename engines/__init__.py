"""Inference for livefuse, laid out by what each part is.

- root: the Engine protocol (engine.py), the backend factory, the pipeline and its config, the
  gateway↔pipeline frame contract, the image stages and the stage-time book;
- backends/: the Engine implementations (ONNX Runtime, PyTorch, TensorRT, the Triton client) and the
  GPU-free planning they share (TensorRT plans, per-shape graph keys);
- onnx/: rewrites of the ONNX models (dynamic batch, cheap PRelu, per-shape specialisation) and the checked
  serving copy the engines load; processors/: the face processors; models/: the model registry and cache;
  marking/: the invisible mark; triton/: what serves the Triton tier.
Nothing here knows about WebRTC or asyncio; the gateway calls it from worker threads.
"""
