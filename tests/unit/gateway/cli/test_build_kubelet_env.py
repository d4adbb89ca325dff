"""The gateway starts with the environment a kubelet really gives it.

The example overlay is rendered with `kubectl kustomize`; each gateway container's environment is built as a
kubelet builds it (envFrom ConfigMaps, env with downward-API fields, and the service-link variables of every
Service in the namespace: LIVEFUSE_GATEWAY_SERVICE_HOST, LIVEFUSE_TRITON_PORT_8001_TCP_ADDR, ...), its
Secret volumes are put on disk, and the gateway's own configuration loader runs on that argv and environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.cli import UsageError, load_config
from tests.harness.k8s_render import render
from tests.harness.kubelet_env import container_environment

ROOT = Path(__file__).resolve().parents[4]
OVERLAY = ROOT / "deploy" / "overlays" / "example"
FIELDS = {"status.hostIP": "192.0.2.7", "status.podIP": "192.0.2.7", "spec.nodeName": "node-a",
          "metadata.name": "livefuse-gateway-x"}  # fmt: skip
PLATFORM = ROOT / "deploy" / "overlays" / "example-platform"


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return render(OVERLAY)


def _pods(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job")]


def _gateway(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    deploy = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "livefuse-gateway"
    )
    pod = deploy["spec"]["template"]["spec"]
    return pod, next(c for c in pod["containers"] if c["name"] == "gateway")


def _mount_secrets(pod: dict[str, Any], container: dict[str, Any], args: list[str], tmp: Path) -> list[str]:
    """Secret volumes as files under tmp (one `token` key each), with the argv pointing there."""
    secrets = {v["name"] for v in pod.get("volumes", []) if "secret" in v}
    for mount in container.get("volumeMounts", []):
        if mount["name"] in secrets:
            folder = tmp / mount["name"]
            folder.mkdir()
            (folder / "token").write_text("s3cret-from-the-secret\n")
            args = [a.replace(mount["mountPath"], str(folder)) for a in args]
    return args


def test_every_pod_of_the_base_turns_service_links_off(docs: list[dict[str, Any]]) -> None:
    pods = _pods(docs)
    assert {d["metadata"]["name"] for d in pods} >= {"livefuse-gateway", "livefuse-triton"}
    for doc in pods:
        assert doc["spec"]["template"]["spec"].get("enableServiceLinks") is False, doc["metadata"]["name"]


@pytest.mark.parametrize("service_links", [None, True], ids=["as-the-pod-says", "links-on"])
def test_the_gateway_loads_its_configuration_from_the_kubelet_environment(
    docs: list[dict[str, Any]], tmp_path: Path, service_links: bool | None
) -> None:
    """As rendered, and also where service links are on anyway (a platform's admission webhook, a copy of
    the base without the field): the names a kubelet adds never stop the gateway."""
    pod, container = _gateway(docs)
    env, args = container_environment(docs, pod, container, FIELDS, service_links=service_links)
    if service_links:  # the collisions are really there: the test would mean nothing otherwise
        assert env["LIVEFUSE_GATEWAY_SERVICE_HOST"].startswith("10.96.")
        assert env["LIVEFUSE_GATEWAY_PORT"].startswith("tcp://10.96.")
        assert env["LIVEFUSE_TRITON_PORT_8001_TCP_PROTO"] == "tcp"
        assert env["LIVEFUSE_TRITON_SERVICE_PORT_GRPC"] == "8001"
    assert "KUBERNETES_SERVICE_HOST" in env
    args = _mount_secrets(pod, container, args, tmp_path)
    config, steps = load_config(args, env)
    assert not steps.self_signed and not steps.discover_address
    assert config.host == env["LIVEFUSE_HOST"]
    assert config.port == 8080 == container["ports"][0]["containerPort"]
    assert config.auth.token == "s3cret-from-the-secret"
    assert config.public_url is not None and "192.0.2.7" in config.public_url
    assert config.sessions.max_sessions == int(env["LIVEFUSE_MAX_SESSIONS"])


def test_the_platform_overlay_names_each_node_over_https_and_asks_stun_for_its_address(
    tmp_path: Path,
) -> None:
    """deploy/overlays/example-platform (node-https and monitoring components, STUN/TURN settings), as a
    kubelet would start it: the `$(NODE_NAME)` in the public URL is expanded (it is defined above it)."""
    docs = render(PLATFORM, components=True)
    pod, container = _gateway(docs)
    env, args = container_environment(docs, pod, container, FIELDS, service_links=True)
    config, steps = load_config(_mount_secrets(pod, container, args, tmp_path), env)
    assert config.public_url == "https://node-a.gw.media.example:8080"
    assert config.tls is not None
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert config.tls.key.parent == config.tls.cert.parent
    assert secrets[mounts[str(config.tls.cert.parent)]] == "livefuse-gateway-tls"
    certificate = next(d for d in docs if d["kind"] == "Certificate")
    assert certificate["spec"]["secretName"] == "livefuse-gateway-tls"
    assert certificate["spec"]["dnsNames"] == ["*.gw.media.example"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    assert steps.discover_address and config.ice.stun == ("stun:stun.media.example:3478",)
    assert [t.url for t in config.ice.turn] == ["turn:turn.media.example:3478?transport=udp"]


def test_a_misspelt_setting_is_still_an_error_beside_the_injected_names(
    docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    pod, container = _gateway(docs)
    env, args = container_environment(docs, pod, container, FIELDS, service_links=True)
    args = _mount_secrets(pod, container, args, tmp_path)
    env["LIVEFUSE_MAX_SESION"] = "4"
    with pytest.raises(UsageError, match="unknown environment variable LIVEFUSE_MAX_SESION"):
        load_config(args, env)


def test_a_service_named_livefuse_does_not_take_the_port(docs: list[dict[str, Any]], tmp_path: Path) -> None:
    """A Service named `livefuse` would inject LIVEFUSE_PORT=tcp://IP:PORT over the real setting's name."""
    pod, container = _gateway(docs)
    env, args = container_environment(docs, pod, container, FIELDS)
    args = _mount_secrets(pod, container, args, tmp_path)
    env.pop("LIVEFUSE_PORT")
    env["LIVEFUSE_PORT"] = "tcp://10.96.0.99:8080"
    config, _ = load_config(args, env)
    assert config.port == 8080
    env["LIVEFUSE_PORT"] = "9090"
    assert load_config(args, env)[0].port == 9090
