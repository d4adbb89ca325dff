"""Triton Inference Server backend: the `Engine` protocol over `tritonclient` gRPC, one request per batch.

Why: with Triton as the shared inference tier, its dynamic batcher merges frames from every gateway replica,
not only from the sessions of one process; the pipeline and the scheduler never learn which backend runs.
Tensor specs and the batch range come from the server. Failures are one-line `EngineError`s that say what to
do (checked here before a request leaves where possible). gRPC's reconnect backoff is capped at
`reconnect_max_ms` (its default grows to two minutes), so a restarted server is used again within seconds.
`shm=True` (same host) passes tensors through a pool of registered POSIX shared-memory regions, dropped and
registered afresh after any failure (a restarted server forgets them); CUDA shared memory is documented in
docs/SCALING.md but not wired: it needs the frames on the GPU already.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from engines.engine import BatchRange, DescribedEngine, EngineError, TensorSpec, batch_size_of

INSTALL_HINT = "the triton engine needs `pip install 'livefuse[triton]'` (tritonclient[grpc])"

# Triton datatype strings -> numpy dtypes (KServe v2 protocol names)
NUMPY_DTYPES: Mapping[str, Any] = {
    "FP32": np.float32,
    "FP16": np.float16,
    "FP64": np.float64,
    "INT64": np.int64,
    "INT32": np.int32,
    "INT8": np.int8,
    "UINT8": np.uint8,
    "BOOL": np.bool_,
}


@dataclass(frozen=True)
class TritonConfig:
    url: str = "127.0.0.1:8001"  # gRPC endpoint HOST:PORT (dns:///HOST:PORT = every address of HOST)
    model_prefix: str = ""  # model name = prefix + engine name
    model_version: str = ""  # "" = the server's policy (latest)
    timeout_s: float = 10.0  # per inference request (client deadline)
    connect_timeout_s: float = 60.0  # at start-up: how long to wait for the server and the model
    shm: bool = False  # system shared memory (server on the same host)
    reconnect_max_ms: int = 1000  # cap on gRPC's reconnect backoff
    ready_cache_s: float = 1.0  # is_ready() answers from a cache this fresh

    def __post_init__(self) -> None:
        host, sep, port = self.url.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"triton url must be HOST:PORT, got {self.url!r}")
        if self.timeout_s <= 0 or self.connect_timeout_s < 0:
            raise ValueError("timeout_s must be > 0 and connect_timeout_s >= 0")


def import_client() -> tuple[Any, Any]:
    try:
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException
    except ImportError:
        raise EngineError(INSTALL_HINT) from None
    return grpcclient, InferenceServerException


def describe_error(exc: Exception, url: str, model: str) -> str:
    """One line naming what went wrong, from a tritonclient exception (status + message)."""
    status = str(getattr(exc, "status", lambda: None)() or "")
    raw = str(getattr(exc, "message", lambda: None)() or exc)
    text = raw.splitlines()[0] if raw else type(exc).__name__
    if "UNAVAILABLE" in status or "failed to connect" in text.lower() or "connection refused" in text.lower():
        return f"triton at {url} unreachable ({text})"
    if "DEADLINE_EXCEEDED" in status or "deadline" in text.lower():
        return f"triton at {url}: {model} timed out ({text})"
    if "NOT_FOUND" in status or "unavailable model" in text.lower() or "not ready" in text.lower():
        return f"triton at {url}: model {model} not ready ({text})"
    return f"triton at {url}: {model}: {text}"


def check_inputs(
    name: str, specs: tuple[TensorSpec, ...], inputs: Mapping[str, np.ndarray], batch: BatchRange
) -> int:
    """Validate names, ranks, fixed dims and batch before a request leaves; returns the batch size."""
    missing = [s.name for s in specs if s.name not in inputs]
    extra = sorted(set(inputs) - {s.name for s in specs})
    if missing or extra:
        raise EngineError(
            f"{name}: input names {sorted(inputs)} do not match the model's {[s.name for s in specs]}"
        )
    n = batch_size_of(dict(inputs))
    if not batch.min <= n <= batch.max:
        raise EngineError(f"{name}: batch {n} outside {batch.min}..{batch.max}")
    for spec in specs:
        arr = inputs[spec.name]
        if arr.ndim != len(spec.shape):
            raise EngineError(
                f"{name}: input {spec.name} has shape {arr.shape}, model expects "
                f"rank {len(spec.shape)} {spec.shape}"
            )
        for got, want in zip(arr.shape[1:], spec.shape[1:], strict=True):
            if isinstance(want, int) and want > 0 and got != want:
                raise EngineError(
                    f"{name}: input {spec.name} has shape {arr.shape}, model expects {spec.shape}"
                )
    return n


def _specs(entries: Any, batched: bool) -> tuple[TensorSpec, ...]:
    out = []
    for t in entries:
        dims: list[int | str | None] = [int(d) if int(d) >= 0 else None for d in t.shape]
        if not batched:
            raise EngineError("model has max_batch_size 0 (no batch dim): rebuild the repository")
        if dims and dims[0] is None:
            dims[0] = "batch"
        out.append(TensorSpec(t.name, t.datatype, tuple(dims)))
    return tuple(out)


class _ShmSlot:
    """One registered input region and one output region, used by one call at a time."""

    def __init__(self, client: Any, shm: Any, in_bytes: int, out_bytes: int, timeout_s: float) -> None:
        self.tag = f"livefuse-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.in_bytes, self.out_bytes = max(in_bytes, 1), max(out_bytes, 1)
        self._shm = shm
        self.inp = shm.create_shared_memory_region(f"{self.tag}-in", f"/{self.tag}-in", self.in_bytes)
        self.out = shm.create_shared_memory_region(f"{self.tag}-out", f"/{self.tag}-out", self.out_bytes)
        try:
            client.register_system_shared_memory(
                f"{self.tag}-in", f"/{self.tag}-in", self.in_bytes, client_timeout=timeout_s
            )
            client.register_system_shared_memory(
                f"{self.tag}-out", f"/{self.tag}-out", self.out_bytes, client_timeout=timeout_s
            )
        except Exception:
            self.destroy(None, timeout_s)
            raise

    def destroy(self, client: Any | None, timeout_s: float) -> None:
        if client is not None:
            for suffix in ("in", "out"):
                try:
                    client.unregister_system_shared_memory(f"{self.tag}-{suffix}", client_timeout=timeout_s)
                except Exception:  # noqa: BLE001 - the server may be gone; its registrations went with it
                    pass
        for handle in (self.inp, self.out):
            try:
                self._shm.destroy_shared_memory_region(handle)
            except Exception:  # noqa: BLE001 - already destroyed
                pass


class TritonEngine(DescribedEngine):
    """A model served by Triton. Thread-safe: gRPC channels are, and each shm call holds its own slot."""

    def __init__(self, model: str, config: TritonConfig = TritonConfig()) -> None:
        grpcclient, self._exc_type = import_client()
        self._name = model
        self._model = config.model_prefix + model
        self._config = config
        self._client: Any | None = grpcclient.InferenceServerClient(
            config.url,
            channel_args=[
                ("grpc.max_send_message_length", 256 << 20),
                ("grpc.max_receive_message_length", 256 << 20),
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.min_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", config.reconnect_max_ms),
                # with `dns:///headless-service:8001` every Triton pod is a backend, used in turn
                ("grpc.lb_policy_name", "round_robin"),
            ],
        )
        self._grpc = grpcclient
        self._wait_until_ready(config.connect_timeout_s)
        try:
            meta = self._client.get_model_metadata(
                self._model, config.model_version, client_timeout=config.timeout_s
            )
            model_config = self._client.get_model_config(
                self._model, config.model_version, client_timeout=config.timeout_s
            ).config
        except self._exc_type as e:
            raise EngineError(describe_error(e, config.url, self._model)) from None
        max_batch = int(model_config.max_batch_size)
        self._inputs = _specs(meta.inputs, max_batch > 0)
        self._outputs = _specs(meta.outputs, max_batch > 0)
        self._batch = BatchRange(1, max_batch)
        self._lock = threading.Lock()
        self._ready_at = (0.0, False)
        self._slots: queue.SimpleQueue[_ShmSlot] = queue.SimpleQueue()
        self._all_slots: list[_ShmSlot] = []
        self._shm: Any = None
        if config.shm:
            import tritonclient.utils.shared_memory as shm

            self._shm = shm

    @property
    def model(self) -> str:
        """The name Triton serves this engine under (prefix + engine name)."""
        return self._model

    @property
    def url(self) -> str:
        return self._config.url

    def _wait_until_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last = "not asked yet"
        while True:
            try:
                assert self._client is not None
                if self._client.is_model_ready(self._model, self._config.model_version, client_timeout=2.0):
                    return
                last = f"triton at {self._config.url}: model {self._model} not ready"
            except self._exc_type as e:
                last = describe_error(e, self._config.url, self._model)
            if time.monotonic() >= deadline:
                raise EngineError(f"{last} (waited {timeout_s:.0f} s)")
            time.sleep(0.25)

    def is_ready(self) -> bool:
        """Is the model ready on the server now? Cached for `ready_cache_s`; blocking (call from a thread)."""
        at, ok = self._ready_at
        now = time.monotonic()
        if now - at < self._config.ready_cache_s:
            return ok
        client = self._client
        try:
            ok = bool(
                client is not None
                and client.is_model_ready(self._model, self._config.model_version, client_timeout=1.0)
            )
        except self._exc_type:
            ok = False
        self._ready_at = (now, ok)
        return ok

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        client = self._client
        if client is None:
            raise EngineError(f"{self._name}: engine is closed")
        n = check_inputs(self._name, self._inputs, inputs, self._batch)
        if self._shm is not None:
            return self._infer_shm(client, inputs, n)
        grpc = self._grpc
        requests = []
        for spec in self._inputs:
            arr = np.ascontiguousarray(inputs[spec.name])
            req = grpc.InferInput(spec.name, list(arr.shape), spec.dtype)
            req.set_data_from_numpy(arr)
            requests.append(req)
        outs = [grpc.InferRequestedOutput(s.name) for s in self._outputs]
        result = self._call(client, requests, outs)
        return {s.name: self._checked(result.as_numpy(s.name), s.name, n) for s in self._outputs}

    def _call(self, client: Any, requests: list[Any], outs: list[Any]) -> Any:
        try:
            return client.infer(
                self._model,
                requests,
                model_version=self._config.model_version,
                outputs=outs,
                client_timeout=self._config.timeout_s,
            )
        except self._exc_type as e:
            self._ready_at = (0.0, False)
            raise EngineError(describe_error(e, self._config.url, self._model)) from None

    def _checked(self, arr: np.ndarray | None, name: str, n: int) -> np.ndarray:
        if arr is None or arr.ndim == 0 or arr.shape[0] != n:
            got = None if arr is None else arr.shape
            raise EngineError(f"{self._name}: output {name} has shape {got}, expected batch {n}")
        return arr

    def _out_shape(self, spec: TensorSpec, n: int) -> tuple[int, ...] | None:
        dims = spec.shape[1:]
        if all(isinstance(d, int) and d > 0 for d in dims):
            return (n, *(int(d) for d in dims))  # type: ignore[arg-type]
        return None

    def _infer_shm(self, client: Any, inputs: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
        grpc, shm = self._grpc, self._shm
        arrays = [np.ascontiguousarray(inputs[s.name], dtype=NUMPY_DTYPES.get(s.dtype)) for s in self._inputs]
        in_bytes = sum(a.nbytes for a in arrays)
        shapes = {s.name: self._out_shape(s, n) for s in self._outputs}
        out_bytes = sum(
            int(np.prod(sh)) * np.dtype(NUMPY_DTYPES[s.dtype]).itemsize
            for s in self._outputs
            if (sh := shapes[s.name]) is not None
        )
        slot = self._take_slot(client, in_bytes, out_bytes)
        healthy = True  # a slot goes back to the pool only after a call that worked
        try:
            requests, offset = [], 0
            for spec, arr in zip(self._inputs, arrays, strict=True):
                shm.set_shared_memory_region(slot.inp, [arr], offset=offset)
                req = grpc.InferInput(spec.name, list(arr.shape), spec.dtype)
                req.set_shared_memory(f"{slot.tag}-in", arr.nbytes, offset=offset)
                requests.append(req)
                offset += arr.nbytes
            outs, places, offset = [], {}, 0
            for spec in self._outputs:
                out = grpc.InferRequestedOutput(spec.name)
                shape = shapes[spec.name]
                if shape is not None:
                    size = int(np.prod(shape)) * np.dtype(NUMPY_DTYPES[spec.dtype]).itemsize
                    out.set_shared_memory(f"{slot.tag}-out", size, offset=offset)
                    places[spec.name] = (offset, shape)
                    offset += size
                outs.append(out)
            try:
                result = self._call(client, requests, outs)
            except EngineError:
                healthy = False
                self._drop_slots(client)  # registrations may be gone with the server: start afresh
                raise
            outputs: dict[str, np.ndarray] = {}
            for spec in self._outputs:
                if spec.name in places:
                    off, shape = places[spec.name]
                    outputs[spec.name] = shm.get_contents_as_numpy(
                        slot.out, NUMPY_DTYPES[spec.dtype], list(shape), offset=off
                    ).copy()
                else:
                    outputs[spec.name] = self._checked(result.as_numpy(spec.name), spec.name, n)
            return outputs
        finally:
            if healthy:
                self._slots.put(slot)

    def _take_slot(self, client: Any, in_bytes: int, out_bytes: int) -> _ShmSlot:
        try:
            slot = self._slots.get_nowait()
        except queue.Empty:
            slot = None
        if slot is not None and slot.in_bytes >= in_bytes and slot.out_bytes >= out_bytes:
            return slot
        if slot is not None:  # too small: replace it with one sized for this call (with headroom)
            with self._lock:
                if slot in self._all_slots:
                    self._all_slots.remove(slot)
            slot.destroy(client, self._config.timeout_s)
            in_bytes, out_bytes = max(in_bytes, slot.in_bytes * 2), max(out_bytes, slot.out_bytes * 2)
        try:
            new = _ShmSlot(client, self._shm, in_bytes, out_bytes, self._config.timeout_s)
        except self._exc_type as e:
            raise EngineError(describe_error(e, self._config.url, self._model)) from None
        except OSError as e:
            raise EngineError(
                f"{self._name}: cannot create shared memory ({e}); run without --triton-shm"
            ) from None
        with self._lock:
            self._all_slots.append(new)
        return new

    def _drop_slots(self, client: Any | None) -> None:
        with self._lock:
            slots, self._all_slots = self._all_slots, []
        while True:
            try:
                self._slots.get_nowait()
            except queue.Empty:
                break
        for s in slots:
            s.destroy(client, 1.0)

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is None:
            return
        self._drop_slots(client)
        try:
            client.close()
        except Exception:  # noqa: BLE001 - closing a channel to a vanished server
            pass
