#!/usr/bin/env python3
"""Write the alert rules' two Kubernetes forms from alerts/livefuse-alerts.yaml, their one source of truth (a
test checks they match): prometheus-alerts.yaml (a ConfigMap with a stable name, for a plain Prometheus's
rule_files) and components/monitoring/prometheus-rule.yaml (a PrometheusRule, for the Prometheus Operator)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "alerts" / "livefuse-alerts.yaml"
TARGET = HERE / "components" / "monitoring" / "prometheus-rule.yaml"
CONFIGMAP = HERE / "prometheus-alerts.yaml"

CONFIGMAP_HEADER = """# The alert rules as a ConfigMap for a plain Prometheus (mount it at its rule_files).
# Generated from deploy/k8s/alerts/livefuse-alerts.yaml by deploy/k8s/render_rules.py (a test checks).
apiVersion: v1
kind: ConfigMap
metadata:
  name: livefuse-prometheus-alerts
  namespace: livefuse
  labels: {app.kubernetes.io/part-of: livefuse}
data:
  livefuse-alerts.yaml: |
"""

HEADER = """# The alert rules for the Prometheus Operator. Generated from alerts/livefuse-alerts.yaml
# by deploy/k8s/render_rules.py (a test checks they match): edit that file, then run the script.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: livefuse-alerts
  namespace: livefuse
  labels: {app.kubernetes.io/part-of: livefuse}
spec:
"""


def render(rules_yaml: str) -> str:
    body = [line for line in rules_yaml.rstrip("\n").split("\n") if not line.startswith("#")]
    return HEADER + "".join(f"  {line}\n" if line else "\n" for line in body)


def render_configmap(rules_yaml: str) -> str:
    lines = rules_yaml.rstrip("\n").split("\n")
    return CONFIGMAP_HEADER + "".join(f"    {line}\n" if line else "\n" for line in lines)


def main() -> int:
    text = SOURCE.read_text()
    TARGET.write_text(render(text))
    CONFIGMAP.write_text(render_configmap(text))
    print(f"{TARGET}, {CONFIGMAP}: from {SOURCE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
