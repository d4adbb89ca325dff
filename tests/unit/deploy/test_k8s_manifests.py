"""deploy/k8s: every manifest validates against the Kubernetes schemas (kubernetes-validate, strict: unknown
fields are errors), and the manifests agree with the code they run (flags exist, probes point at real routes,
metric names match what the gateway exports, the dashboard ConfigMap matches deploy/grafana/livefuse.json)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils as kv

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
VERSIONS = ("1.29.0", "1.33.0")  # a supported-but-older cluster and a recent one


def _docs() -> list[tuple[str, dict[str, Any]]]:
    """Every Kubernetes object under deploy/k8s (not the kustomizations, not the Prometheus rule files, not
    the Prometheus Operator component, whose CRDs have no schema here: test_monitoring_component)."""
    out = []
    for path in sorted(K8S.rglob("*.yaml")):
        if path.name == "kustomization.yaml" or path.parent.name == "alerts" or "components" in path.parts:
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((str(path.relative_to(K8S)), doc))
    return out


DOCS = _docs()


def _one(kind: str, name: str) -> dict[str, Any]:
    return next(d for _, d in DOCS if d["kind"] == kind and d["metadata"]["name"] == name)


def _container(deploy: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def test_every_expected_manifest_is_there() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in DOCS}
    for want in [
        ("Deployment", "livefuse-triton"),
        ("Deployment", "livefuse-gateway"),
        ("Service", "livefuse-triton"),
        ("Service", "livefuse-gateway"),
        ("PodDisruptionBudget", "livefuse-gateway"),
        ("PodDisruptionBudget", "livefuse-triton"),
        ("HorizontalPodAutoscaler", "livefuse-gateway"),
        ("HorizontalPodAutoscaler", "livefuse-triton"),
        ("ConfigMap", "livefuse-grafana-dashboard"),
        ("ConfigMap", "livefuse-prometheus-scrape"),
        ("ConfigMap", "livefuse-prometheus-adapter"),
        ("Job", "livefuse-loadgen"),
    ]:
        assert want in kinds


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("name", "doc"), DOCS, ids=[f"{n}:{d['kind']}/{d['metadata']['name']}" for n, d in DOCS]
)
def test_manifest_validates_against_kubernetes_schema(name: str, doc: dict[str, Any], version: str) -> None:
    kv.validate(doc, version, strict=True)  # raises ValidationError on any schema violation


def test_schema_validation_is_real() -> None:
    bad = json.loads(json.dumps(_one("Deployment", "livefuse-gateway")))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pot"] = 1
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, VERSIONS[-1], strict=True)


def _base_env() -> dict[str, str]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    generator = next(g for g in kustomization["configMapGenerator"] if g["name"] == "livefuse-gateway-env")
    return dict(literal.split("=", 1) for literal in generator["literals"])


def test_gateway_args_and_env_are_real_settings_and_probes_real_routes(tmp_path: Path) -> None:
    from gateway.cli import build_config, build_parser, env_values

    deploy = _one("Deployment", "livefuse-gateway")
    c = _container(deploy, "gateway")
    assert "command" not in c  # the image's entrypoint (tini -> gateway) stays
    assert c["envFrom"] == [{"configMapRef": {"name": "livefuse-gateway-env"}}]
    parser = build_parser()
    (tmp_path / "token").write_text("from-the-secret\n")  # the Secret volume mounted at /etc/livefuse
    args = [a.replace("$(NODE_IP)", "10.0.0.7").replace("/etc/livefuse", str(tmp_path)) for a in c["args"]]
    own = {e["name"]: e["value"].replace("$(NODE_IP)", "10.0.0.7") for e in c["env"] if "value" in e}
    config = build_config(parser.parse_args(args), None, env_values({**_base_env(), **own}))
    assert config.pipeline.engine.backend == "triton"
    assert config.pipeline.engine.triton.url.endswith(":8001")
    # the port in its three places
    assert config.port == c["ports"][0]["containerPort"] == 8080
    assert config.public_url == f"http://10.0.0.7:{config.port}"
    assert str(config.model_dir) == "/opt/livefuse/models"  # baked into the image
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    spec = deploy["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True
    assert spec["securityContext"]["runAsNonRoot"] is True and "initContainers" not in spec
    pre_stop = int(c["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert config.drain_grace_s >= 60
    assert spec["terminationGracePeriodSeconds"] > pre_stop + config.drain_grace_s + config.shutdown_grace_s


def test_triton_init_builds_the_repository_with_real_flags() -> None:
    from scripts.build_engines import _parser

    deploy = _one("Deployment", "livefuse-triton")
    init = deploy["spec"]["template"]["spec"]["initContainers"][0]
    script = init["args"][0]
    assert "provision" not in script and "pip" not in script  # the models come baked in the image
    args = _parser().parse_args(shlex.split(script)[2:])
    assert args.triton_repository == Path("/models") and args.backend in ("onnxruntime", "tensorrt")
    triton = _container(deploy, "triton")
    assert "--model-repository=/models" in triton["args"]
    assert triton["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert triton["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_autoscaling_metrics_exist() -> None:
    adapter = yaml.safe_load(_one("ConfigMap", "livefuse-prometheus-adapter")["data"]["config.yaml"])
    exposed = {r["name"]["as"] for r in adapter["rules"]}
    for name in ("livefuse-gateway", "livefuse-triton"):
        hpa = _one("HorizontalPodAutoscaler", name)
        for m in hpa["spec"]["metrics"]:
            assert m["pods"]["metric"]["name"] in exposed
    # the gateway really exports the gauge the adapter reads
    from gateway.monitoring.monitor import Monitor, MonitorConfig
    from gateway.monitoring.prometheus import make_registry, render

    text = render(make_registry(Monitor(MonitorConfig(nvml=False)).snapshot)).decode()
    assert re.search(r"^livefuse_utilization_ratio ", text, re.M), text[:500]
    series = {r["seriesQuery"].split("{")[0] for r in adapter["rules"]}
    assert series == {"livefuse_utilization_ratio", "nv_inference_queue_duration_us"}


def test_dashboard_configmap_matches_the_dashboard() -> None:
    cm = _one("ConfigMap", "livefuse-grafana-dashboard")
    source = json.loads((ROOT / "deploy" / "grafana" / "livefuse.json").read_text())
    assert json.loads(cm["data"]["livefuse.json"]) == source, "run python deploy/k8s/render_dashboard.py"


def _render(path: Path) -> list[dict[str, Any]]:
    from tests.harness.k8s_render import render

    return render(path)


def test_the_example_overlay_renders_valid_manifests_with_its_image_and_values() -> None:
    docs = _render(ROOT / "deploy" / "overlays" / "example")
    for doc in docs:
        for version in VERSIONS:
            kv.validate(doc, version, strict=True)
    kinds = {
        (
            d["kind"],
            d["metadata"]["name"].rsplit("-", 1)[0] if d["kind"] == "ConfigMap" else d["metadata"]["name"],
        )
        for d in docs
    }
    assert ("Deployment", "livefuse-gateway") in kinds and ("ConfigMap", "livefuse-prometheus") in kinds
    assert ("ConfigMap", "livefuse-prometheus-alerts") in {(d["kind"], d["metadata"]["name"]) for d in docs}
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"]
    images = [c["image"] for p in pods for c in p.get("initContainers", []) + p["containers"]]
    livefuse = [i for i in images if "livefuse" in i]
    assert livefuse and set(livefuse) == {"registry.example.com/media/livefuse:0.1.0"}
    assert all(re.search(r":[\w.-]+$", i) for i in images), images
    env = next(
        d
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("livefuse-gateway-env-")
    )
    assert env["data"]["LIVEFUSE_MAX_SESSIONS"] == "8" and env["data"]["LIVEFUSE_PORT"] == "8080"
    gateway = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("gateway"))
    ref = gateway["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"]
    assert ref == env["metadata"]["name"]  # the generated name (with its hash) is what the pod reads
    rules = next(d for d in docs if d["metadata"]["name"] == "livefuse-prometheus-alerts")  # no hash suffix
    assert "LivefuseLatencySLO" in rules["data"]["livefuse-alerts.yaml"]
    for p in pods:  # nothing is downloaded when a pod starts
        for c in p.get("initContainers", []) + p["containers"]:
            text = " ".join(c.get("command", []) + c.get("args", []))
            assert "pip " not in text and "models provision" not in text and "media provision" not in text


def test_the_base_fixes_no_livefuse_image_tag() -> None:
    base = (K8S / "kustomization.yaml").read_text()
    for doc in DOCS:
        for c in _all_containers(doc[1]):
            if "livefuse" in c["image"]:
                assert c["image"] == "livefuse", doc[0]
    assert "newTag" not in base.split("nvcr.io/nvidia/tritonserver")[0]


def _all_containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    return list(pod.get("initContainers", [])) + list(pod.get("containers", []))


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.cpu"])
def test_dockerfiles_are_multi_stage_non_root_with_tini_and_a_configured_healthcheck(dockerfile: str) -> None:
    text = (ROOT / dockerfile).read_text()
    assert len(re.findall(r"^FROM ", text, re.M)) == 2 and re.search(r"^FROM .* AS build$", text, re.M)
    assert re.search(r"^USER 10001$", text, re.M) and "useradd" in text
    assert re.search(r'^ENTRYPOINT \["tini", "--", "gateway"\]$', text, re.M)
    assert re.search(r'^HEALTHCHECK .*"-m", "gateway\.healthcheck"\]$', text, re.M)
    assert "LIVEFUSE_PORT=8080" in text and "LIVEFUSE_MODEL_DIR=/opt/livefuse/models" in text
    assert "engines.models provision" in text  # at build time, in the build stage
    runtime = text.split("# ---- runtime")[1]
    assert "provision" not in runtime.replace("/opt/provision", "") and "pip install" not in runtime


def test_the_healthcheck_follows_the_gateways_port_and_scheme() -> None:
    from gateway.healthcheck import health_url

    assert health_url({}) == "http://127.0.0.1:8080/healthz"
    assert (
        health_url({"LIVEFUSE_PORT": "9443", "LIVEFUSE_TLS_CERT": "/tls/crt"})
        == "https://127.0.0.1:9443/healthz"
    )
    assert health_url({"LIVEFUSE_SELF_SIGNED": "true"}).startswith("https://")
