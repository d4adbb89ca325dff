"""deploy/k8s/components/monitoring: PodMonitors and a PrometheusRule with stable names that select what
the base really runs (pod labels, named ports, the job the rules read), the same rules as the plain
ConfigMap, and promtool accepts the operator's copy. Rendered with `kubectl kustomize` through
deploy/overlays/example-platform."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.k8s_render import render

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
RULES = K8S / "alerts" / "livefuse-alerts.yaml"


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return render(ROOT / "deploy" / "overlays" / "example-platform", components=True)


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_the_component_renders_with_stable_names(docs: list[dict[str, Any]]) -> None:
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for want in [
        ("PodMonitor", "livefuse-gateway"),
        ("PodMonitor", "livefuse-triton"),
        ("PrometheusRule", "livefuse-alerts"),
        ("ConfigMap", "livefuse-prometheus-alerts"),
    ]:
        assert want in names, want  # no kustomize hash: a Prometheus config can name them
    assert all(d["metadata"]["namespace"] == "livefuse" for d in docs if d["kind"] != "Namespace")


@pytest.mark.parametrize("app", ["livefuse-gateway", "livefuse-triton"])
def test_each_pod_monitor_selects_its_pods_on_a_named_port_with_the_job_the_rules_read(
    docs: list[dict[str, Any]], app: str
) -> None:
    monitor = _named(docs, "PodMonitor", app)["spec"]
    pod = _named(docs, "Deployment", app)["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert monitor["selector"]["matchLabels"].items() <= labels.items()
    assert labels[monitor["jobLabel"]] == app  # job="livefuse-gateway" / "livefuse-triton"
    ports = {p["name"]: p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    for endpoint in monitor["podMetricsEndpoints"]:
        assert endpoint["port"] in ports
        assert str(ports[endpoint["port"]]) == pod["metadata"]["annotations"]["prometheus.io/port"]
    rules = RULES.read_text()
    if app == "livefuse-gateway":
        assert 'up{job="livefuse-gateway"}' in rules and "absent(" in rules
        # the plain scrape config gives the same job label
        scrape = yaml.safe_load(
            next(d for d in docs if d["metadata"]["name"] == "livefuse-prometheus-scrape")["data"][
                "livefuse-scrape.yaml"
            ]
        )
        relabel = scrape["scrape_configs"][0]["relabel_configs"]
        assert {"source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"],
                "target_label": "job"} in relabel  # fmt: skip


def test_the_gateways_metrics_port_is_the_one_its_listener_opens(docs: list[dict[str, Any]]) -> None:
    from gateway.cli import build_config, build_parser

    pod = _named(docs, "Deployment", "livefuse-gateway")["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "gateway")
    args = [a.replace("$(NODE_IP)", "10.0.0.7") for a in container["args"] if not a.startswith("--token")]
    args.append("--token=k8s-token")  # the Secret's file is not here; the node address needs a token
    config = build_config(build_parser().parse_args(args), None, {"LIVEFUSE_HOST": "127.0.0.1"})
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert config.metrics.port == ports["metrics"] and config.metrics.address == "10.0.0.7"
    assert set(config.metrics.groups) == {"metrics", "api", "dashboard"}
    assert not config.metrics.per_session


def test_both_rule_copies_are_the_rules_file_and_promtool_takes_the_operators(
    docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    source = yaml.safe_load(RULES.read_text())
    operator = _named(docs, "PrometheusRule", "livefuse-alerts")["spec"]
    assert operator == source, "run deploy/k8s/render_rules.py"
    configmap = _named(docs, "ConfigMap", "livefuse-prometheus-alerts")["data"]["livefuse-alerts.yaml"]
    assert configmap == RULES.read_text(), "run deploy/k8s/render_rules.py"
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool missing in CI: .ci/run installs the Debian package prometheus")
        pytest.skip("promtool not installed (Debian package prometheus)")
    copy = tmp_path / "operator-rules.yaml"
    copy.write_text(yaml.safe_dump(operator))
    result = subprocess.run([promtool, "check", "rules", str(copy)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 10 rules found" in result.stdout
