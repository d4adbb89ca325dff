"""Inference for livefuse: the Engine protocol, its backends, the model registry and the face processors.

Nothing here knows about WebRTC or asyncio; the gateway calls it from worker threads.
"""
