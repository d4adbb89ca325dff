"""Triton Inference Server as livefuse's shared inference tier: model repository, local server runner.

The client side (the `Engine` over gRPC) is `engines.backends.triton_engine`; this package holds what serves
it: `repository` writes the model repository, `server` runs the `nvidia-pytriton` wheel's `tritonserver`,
`python_model` is the Python-backend model that runs an ONNX on ONNX Runtime inside Triton.
"""
