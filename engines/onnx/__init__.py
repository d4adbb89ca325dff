"""Rewrites of the ONNX models before an engine loads them: a fixed batch of 1 made dynamic (batch), constant
PRelu as Relu/Mul/Add (prelu), a copy specialised to one input shape for the torch backend (specialise), and
the checked serving copy cached beside each model (model_cache). Each rewrite is verified against the
original before it is used."""
