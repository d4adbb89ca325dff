"""Observability of the gateway: frame records, rolling stats, sampler, events, one snapshot, exporters.

The gateway needs only what is re-exported here: build a `Monitor(MonitorConfig(...))` (or any other
`GatewayMonitor`, such as the `NullMonitor` tests build on), start/close it in the app's cleanup_ctx, mount
`setup_monitoring_routes(app, monitor)`, and report every frame as a `FrameRecord`.
"""

from gateway.control.degradation import LEVEL_NAMES, DegradationConfig

from .monitor import Monitor, MonitorConfig
from .null import NullMonitor
from .ports import GatewayMonitor
from .records import FrameRecord, Outcome
from .routes import MONITOR_KEY, setup_monitoring_routes
from .snapshot import SCHEMA_VERSION, StatsSnapshot

__all__ = [
    "LEVEL_NAMES",
    "MONITOR_KEY",
    "SCHEMA_VERSION",
    "DegradationConfig",
    "FrameRecord",
    "GatewayMonitor",
    "Monitor",
    "MonitorConfig",
    "NullMonitor",
    "Outcome",
    "StatsSnapshot",
    "setup_monitoring_routes",
]
