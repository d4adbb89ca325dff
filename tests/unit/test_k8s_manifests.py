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

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
VERSIONS = ("1.29.0", "1.33.0")  # a supported-but-older cluster and a recent one


def _docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((path.name, doc))
    return out


DOCS = _docs()


def _one(kind: str, name: str) -> dict[str, Any]:
    return next(d for _, d in DOCS if d["kind"] == kind and d["metadata"]["name"] == name)


def _container(deploy: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def test_every_expected_manifest_is_there() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for _, d in DOCS}
    for want in [("Deployment", "livefuse-triton"), ("Deployment", "livefuse-gateway"),
                 ("Service", "livefuse-triton"), ("Service", "livefuse-gateway"),
                 ("PodDisruptionBudget", "livefuse-gateway"), ("PodDisruptionBudget", "livefuse-triton"),
                 ("HorizontalPodAutoscaler", "livefuse-gateway"),
                 ("HorizontalPodAutoscaler", "livefuse-triton"),
                 ("ConfigMap", "livefuse-grafana-dashboard"), ("ConfigMap", "livefuse-prometheus-scrape"),
                 ("ConfigMap", "livefuse-prometheus-adapter"), ("Job", "livefuse-loadgen")]:
        assert want in kinds


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("name", "doc"), DOCS,
                         ids=[f"{n}:{d['kind']}/{d['metadata']['name']}" for n, d in DOCS])
def test_manifest_validates_against_kubernetes_schema(name: str, doc: dict[str, Any], version: str) -> None:
    kv.validate(doc, version, strict=True)  # raises ValidationError on any schema violation


def test_schema_validation_is_real() -> None:
    bad = json.loads(json.dumps(_one("Deployment", "livefuse-gateway")))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pot"] = 1
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, VERSIONS[-1], strict=True)


def test_gateway_args_are_real_flags_and_probes_real_routes() -> None:
    from gateway.cli import build_config, build_parser

    deploy = _one("Deployment", "livefuse-gateway")
    c = _container(deploy, "gateway")
    args = [a.replace("$(NODE_IP)", "10.0.0.7") for a in c["args"] if not a.startswith("--token-file")]
    config = build_config(build_parser().parse_args(args))
    assert config.processing.engine == "triton" and config.processing.triton is not None
    assert config.processing.triton.url.endswith(":8001")
    assert config.public_url == "http://10.0.0.7:8080"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    spec = deploy["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True
    pre_stop = int(c["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert spec["terminationGracePeriodSeconds"] > pre_stop + config.shutdown_grace_s


def test_triton_init_builds_the_repository_with_real_flags() -> None:
    from scripts.build_engines import _parser

    deploy = _one("Deployment", "livefuse-triton")
    init = deploy["spec"]["template"]["spec"]["initContainers"][0]
    script = init["args"][0]
    build = script.split("&&")[1]
    args = _parser().parse_args(shlex.split(build)[2:])
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
