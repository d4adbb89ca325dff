"""deploy/k8s/alerts/livefuse-alerts.yaml: promtool accepts the rules, its rule tests show each alert firing
on the series that should raise it (and not on a healthy gateway), and the rules read exported metrics."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "k8s" / "alerts" / "livefuse-alerts.yaml"


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool missing in CI: .ci/run installs the Debian package prometheus")
        pytest.skip("promtool not installed (Debian package prometheus; .ci/run installs it in CI)")
    return found


def test_promtool_checks_the_rules() -> None:
    result = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 10 rules found" in result.stdout


def test_each_alert_fires_where_it_should_in_promtool_rule_tests() -> None:
    result = subprocess.run(
        [_promtool(), "test", "rules", RULES.with_name("livefuse-alerts.test.yaml").name],
        capture_output=True,
        text=True,
        cwd=RULES.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_tested_and_reads_exported_metrics() -> None:
    rules = RULES.read_text()
    tests = RULES.with_name("livefuse-alerts.test.yaml").read_text()
    alerts = set(re.findall(r"- alert: (\w+)", rules))
    assert alerts == set(re.findall(r"alertname: (\w+)", tests))
    # the families the collectors declare (counters gain _total, histograms _bucket/_sum/_count on export)
    monitoring = ROOT / "gateway" / "monitoring"
    declared: set[str] = set()
    for module in ("prometheus.py", "front_section.py", "audio_section.py", "container.py"):
        declared |= set(re.findall(r'"(livefuse_\w+)"', (monitoring / module).read_text()))
    # the egress hub exports its own families (a session's push to a downstream WHIP endpoint)
    declared |= set(re.findall(r'"(livefuse_\w+)"', (ROOT / "gateway" / "egress" / "hub.py").read_text()))
    used = {re.sub(r"_(total|bucket|sum|count)$", "", m) for m in re.findall(r"livefuse_\w+", rules)}
    assert used <= declared, sorted(used - declared)
