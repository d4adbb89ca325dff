#!/usr/bin/env python3
"""Write grafana-dashboard.yaml (a ConfigMap) from deploy/grafana/livefuse.json, the one source of truth."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "grafana" / "livefuse.json"
TARGET = HERE / "grafana-dashboard.yaml"

HEADER = """# Grafana dashboard for a Grafana sidecar that loads ConfigMaps labelled grafana_dashboard="1".
# Generated from deploy/grafana/livefuse.json by deploy/k8s/render_dashboard.py (a test checks they match).
apiVersion: v1
kind: ConfigMap
metadata:
  name: livefuse-grafana-dashboard
  namespace: livefuse
  labels:
    grafana_dashboard: "1"
data:
  livefuse.json: |
"""


def render(dashboard_json: str) -> str:
    body = "".join(f"    {line}\n" if line else "\n" for line in dashboard_json.rstrip("\n").split("\n"))
    return HEADER + body


def main() -> int:
    TARGET.write_text(render(SOURCE.read_text()))
    print(f"{TARGET}: from {SOURCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
