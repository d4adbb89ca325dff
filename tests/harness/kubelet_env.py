"""The environment and argv a kubelet gives a container, built from rendered manifests.

Follows the kubelet's own rules (pkg/kubelet/kubelet_pods.go makeEnvironmentVariables, pkg/kubelet/envvars):
service-link variables for every Service of the pod's namespace that has a cluster IP (unless the pod sets
`enableServiceLinks: false`) plus the API server's own `kubernetes` Service (always), then `envFrom`
ConfigMaps in order, then `env` (with `$(VAR)` expanded from what is already defined), then the remaining
service-link variables where no name above took them; `$(VAR)` in args is expanded from the result.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def cluster_ips(docs: list[dict[str, Any]], first: str = "10.96.0.10") -> dict[str, str]:
    """A cluster IP for every non-headless Service, by name (a cluster assigns them; any distinct ones do)."""
    base = ipaddress.ip_address(first)
    out: dict[str, str] = {}
    for doc in docs:
        if doc["kind"] == "Service" and doc["spec"].get("clusterIP") != "None":
            out[doc["metadata"]["name"]] = doc["spec"].get("clusterIP") or str(base + len(out))
    return out


def service_link_vars(name: str, ip: str, ports: list[dict[str, Any]]) -> dict[str, str]:
    """pkg/kubelet/envvars FromServices for one Service."""
    prefix = name.upper().replace("-", "_")
    out = {f"{prefix}_SERVICE_HOST": ip, f"{prefix}_SERVICE_PORT": str(ports[0]["port"])}
    for port in ports:
        if port.get("name"):
            out[f"{prefix}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(port["port"])
    first = ports[0]
    out[f"{prefix}_PORT"] = f"{first.get('protocol', 'TCP').lower()}://{ip}:{first['port']}"
    for port in ports:
        proto = port.get("protocol", "TCP")
        head = f"{prefix}_PORT_{port['port']}_{proto.upper()}"
        out[head] = f"{proto.lower()}://{ip}:{port['port']}"
        out[f"{head}_PROTO"] = proto.lower()
        out[f"{head}_PORT"] = str(port["port"])
        out[f"{head}_ADDR"] = ip
    return out


def _expand(text: str, env: Mapping[str, str]) -> str:
    return _REF.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def container_environment(
    docs: list[dict[str, Any]],
    pod: dict[str, Any],
    container: dict[str, Any],
    fields: Mapping[str, str],
    service_links: bool | None = None,
) -> tuple[dict[str, str], list[str]]:
    """(environment, argv after the entrypoint) of `container` in pod spec `pod`, namespace from the docs.

    `fields` answers downward-API fieldRefs (status.hostIP, ...). `service_links` overrides the pod's
    `enableServiceLinks` (None: as the pod says; Kubernetes' default is true).
    """
    namespace = next((d["metadata"].get("namespace") for d in docs if d["kind"] == "Service"), "default")
    ips = cluster_ips(docs)
    links = pod.get("enableServiceLinks", True) if service_links is None else service_links
    services: dict[str, str] = service_link_vars("kubernetes", "10.96.0.1", [{"name": "https", "port": 443}])
    if links:
        for doc in docs:
            name = doc["metadata"]["name"]
            if doc["kind"] == "Service" and name in ips and doc["metadata"].get("namespace") == namespace:
                services.update(service_link_vars(name, ips[name], doc["spec"]["ports"]))
    configmaps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        ref = source["configMapRef"]["name"]
        prefix = source.get("prefix", "")
        env.update({prefix + k: str(v) for k, v in configmaps[ref].items()})
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = _expand(str(var["value"]), {**services, **env})
        elif "fieldRef" in var["valueFrom"]:
            env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
        elif "configMapKeyRef" in var["valueFrom"]:
            ref = var["valueFrom"]["configMapKeyRef"]
            env[var["name"]] = str(configmaps[ref["name"]][ref["key"]])
        else:
            raise ValueError(f"no kubelet model for {var}")
    for name, value in services.items():
        env.setdefault(name, value)
    args = [_expand(str(a), env) for a in container.get("args", [])]
    return env, args
