"""The health check reads the gateway's configuration the gateway's way: the file LIVEFUSE_CONFIG names,
under the LIVEFUSE_* variables, and nothing heavier than the option declarations."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli.option import UsageError
from gateway.config import GatewayConfig
from gateway.healthcheck import DEFAULT_PORT, health_url


def test_the_port_and_scheme_follow_the_file_under_the_environment(tmp_path: Path) -> None:
    toml = tmp_path / "gw.toml"
    toml.write_text('port = 9001\ntls_cert = "/tls/crt"\ntls_key = "/tls/key"\n')
    assert health_url({"LIVEFUSE_CONFIG": str(toml)}) == "https://127.0.0.1:9001/healthz"
    assert (
        health_url({"LIVEFUSE_CONFIG": str(toml), "LIVEFUSE_PORT": "9002"})
        == "https://127.0.0.1:9002/healthz"
    )
    assert health_url({}) == f"http://127.0.0.1:{GatewayConfig().port}/healthz"
    assert DEFAULT_PORT == GatewayConfig().port


def test_a_setting_the_gateway_would_refuse_is_refused_here_too(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="LIVEFUSE_PROT"):
        health_url({"LIVEFUSE_PROT": "9000"})
    (tmp_path / "gw.toml").write_text("prot = 9000\n")
    with pytest.raises(ValueError, match="prot"):
        health_url({"LIVEFUSE_CONFIG": str(tmp_path / "gw.toml")})


def test_the_check_loads_no_media_code() -> None:
    """It runs every 15 s beside a busy gateway: the declarations only, not aiortc, numpy or the config."""
    code = (
        "import sys, gateway.healthcheck as h; h.health_url({}); "
        "print(sorted(m for m in sys.modules if m.startswith(('aiortc', 'numpy', 'gateway.config'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
