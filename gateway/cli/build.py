"""Merged option values -> GatewayConfig: each option's value onto its fields, then the few settings that
need more than one value or the machine (secrets read from files, TLS, parallelism by core count, the model
directory from LIVEFUSE_MODEL_DIR, the monitor's view of the machine)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.models.store import default_model_dir
from gateway.cli import values as v
from gateway.cli.declarations import OPTIONS
from gateway.cli.layering import layered_values, merged_values
from gateway.cli.option import UNSET, field_of, field_value, product_defaults, with_fields
from gateway.config import GatewayConfig, default_parallelism
from gateway.control.capacity import usable_cores
from gateway.http.tls import TlsConfig
from gateway.secret_file import secret

DEFAULT_EVENT_LOG = Path.home() / ".local" / "state" / "livefuse" / "events.jsonl"


def config_from(values: Mapping[str, Any]) -> GatewayConfig:
    """The configuration from one value per option key (layering.merged_values); keys not given keep the
    product's defaults."""
    changes: dict[str, Any] = {}
    for option in OPTIONS:
        raw = values.get(option.key)
        if raw is None or not option.fields:
            continue
        value = field_value(option, raw)
        if value is not UNSET:
            changes.update(dict.fromkeys(option.fields, value))
    defaults = product_defaults()
    changes.update(_secrets(values))
    changes["tls"] = _tls(values)
    changes["ice.public_address"] = v.public_address(values.get("ice_public_address"), values.get("stun"))
    if "model_dir" not in changes:  # flag/TOML > $LIVEFUSE_MODEL_DIR > ~/.cache/livefuse/models
        changes["model_dir"] = default_model_dir(os.environ)
    changes.update(_parallelism(values, changes, defaults))
    changes["monitor.parallelism"] = float(changes["scheduler.workers"])
    # affinity and the cgroup quota (a pod's CPU limit), read here at the edge
    changes["monitor.cpu_cores"] = usable_cores()
    changes.setdefault("monitor.event_log", DEFAULT_EVENT_LOG)
    return with_fields(defaults, changes)


def _secrets(values: Mapping[str, Any]) -> dict[str, Any]:
    """Tokens and secrets from files (mounted Secrets), where the value itself is not given."""
    changes: dict[str, Any] = {}
    if values.get("token") is None and values.get("token_file") is not None:
        changes["auth.token"] = secret(values["token_file"], "--token-file")
    if values.get("egress_token") is None and values.get("egress_token_file") is not None:
        changes["egress.default_token"] = secret(values["egress_token_file"], "--egress-token-file")
    if values.get("mark_key_file") is not None:
        changes["sessions.marking.key"] = secret(values["mark_key_file"], "--mark-key-file").encode()
    if values.get("webhook_secret") is None and values.get("webhook_secret_file") is not None:
        changes["webhooks.secret"] = secret(values["webhook_secret_file"], "--webhook-secret-file")
    return changes


def _tls(values: Mapping[str, Any]) -> TlsConfig | None:
    cert, key = values.get("tls_cert"), values.get("tls_key")
    if values.get("self_signed"):
        if cert or key:
            raise ValueError("--self-signed makes its own certificate: give it without --tls-cert/--tls-key")
        return None  # made in main(), once the config is known to be good
    if bool(cert) != bool(key):
        raise ValueError("--tls-cert and --tls-key go together")
    return TlsConfig(cert=Path(str(cert)), key=Path(str(key))) if cert else None


def _parallelism(
    values: Mapping[str, Any], changes: Mapping[str, Any], defaults: GatewayConfig
) -> dict[str, Any]:
    """Workers and ONNX Runtime threads by engine and core count (default_parallelism) where not given; one
    worker asked for without a thread count gets ORT's own threading (all cores)."""

    def chosen(path: str) -> Any:
        return changes[path] if path in changes else field_of(defaults, path)

    workers, threads = default_parallelism(
        chosen("pipeline.engine.backend"), chosen("pipeline.engine.providers"), v.cores()
    )
    asked = values.get("workers")
    if asked is not None and values.get("intra_op_threads") is None and int(asked) == 1:
        threads = 0
    return {
        "scheduler.workers": changes.get("scheduler.workers", workers),
        "pipeline.engine.intra_op_threads": changes.get("pipeline.engine.intra_op_threads", threads),
    }


def build_config(
    args: argparse.Namespace,
    file_values: Mapping[str, Any] | None = None,
    env: Mapping[str, Any] | None = None,
) -> GatewayConfig:
    """The parsed flags over environment values (env_values) over TOML values (keys like the flags, dashes or
    underscores), as a GatewayConfig."""
    return config_from(merged_values(args, file_values, env))


@dataclass(frozen=True)
class StartupSteps:
    """What main() does once the configuration is good: a certificate to make (--self-signed), the public
    address to ask the first STUN server for (--ice-public-address auto)."""

    self_signed: bool = False
    discover_address: bool = False


def load_config(argv: Sequence[str] | None, environ: Mapping[str, str]) -> tuple[GatewayConfig, StartupSteps]:
    """The configuration loader: flags, the environment (LIVEFUSE_*) and the TOML file they name, merged
    into a GatewayConfig, and the start-up steps they ask for. Raises UsageError/ValueError/OSError on a
    bad setting; checks nothing about the machine."""
    values = layered_values(argv, environ)
    steps = StartupSteps(
        self_signed=bool(values.get("self_signed")),
        discover_address=v.auto_address(values.get("ice_public_address")),
    )
    return config_from(values), steps
