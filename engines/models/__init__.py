"""Model registry: where every model comes from, its hash, its signature; provisioning into a cache dir."""

from engines.models.registry import REGISTRY_IDS, ModelSpec, Task, get_spec, registry
from engines.models.store import ModelStore, ModelUnavailable

__all__ = ["REGISTRY_IDS", "ModelSpec", "ModelStore", "ModelUnavailable", "Task", "get_spec", "registry"]
