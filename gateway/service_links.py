"""Environment variables a Kubernetes kubelet injects for Services, told apart from LIVEFUSE_* settings.

A kubelet gives every container, for every Service in its namespace (unless the pod says
`enableServiceLinks: false`), `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT`, `<NAME>_SERVICE_PORT_<PORTNAME>`
and the Docker-links set `<NAME>_PORT`, `<NAME>_PORT_<n>_<PROTO>` (+ `_PROTO`, `_PORT`, `_ADDR`), where NAME
is the Service's name upper-cased with dashes as underscores. A Service named `livefuse-gateway` therefore
yields `LIVEFUSE_GATEWAY_SERVICE_HOST` and friends, which the gateway must not take for a misspelt setting.
The configuration loader (gateway.cli) skips these names; a name that is also a real setting (`LIVEFUSE_PORT`
for a Service named `livefuse`) is skipped only when its value has a service link's shape (`tcp://IP:PORT`).
"""

from __future__ import annotations

import re

_SHAPES = (
    re.compile(r"^[A-Z0-9_]+_SERVICE_HOST$"),
    re.compile(r"^[A-Z0-9_]+_SERVICE_PORT(_[A-Z0-9_]+)?$"),
    re.compile(r"^[A-Z0-9_]+_PORT$"),
    re.compile(r"^[A-Z0-9_]+_PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?$"),
)
_LINK_VALUE = re.compile(r"^(tcp|udp|sctp)://\S+:\d+$")


def service_link_name(name: str) -> bool:
    """True when `name` has the shape of a variable a kubelet injects for a Service."""
    return any(shape.match(name) for shape in _SHAPES)


def injected_by_kubernetes(name: str, value: str, known_setting: bool) -> bool:
    """Whether the loader should skip `name`: an unknown name of a service link's shape, or a real setting's
    name holding a service link's value (`LIVEFUSE_PORT=tcp://10.0.0.1:8080`)."""
    if not service_link_name(name):
        return False
    return not known_setting or bool(_LINK_VALUE.match(value.strip()))
