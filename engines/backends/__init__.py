"""The Engine implementations behind `engines.engine.Engine`: ONNX Runtime, PyTorch, TensorRT and the Triton
client, with the GPU-free planning they share (TensorRT plans and buckets, per-shape graph keys).
The pipeline gets its engines from `engines.factory.create_engine`, which picks one from an EngineConfig."""
