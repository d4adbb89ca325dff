"""The egress hub's counts of state changes, as Prometheus reads them."""

from __future__ import annotations

from gateway.egress.config import EgressConfig
from gateway.egress.policy import EgressState
from gateway.egress.push import Target


def test_hub_counts_state_changes_for_prometheus() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from gateway.egress.hub import EgressHub

    events: list[tuple[str, str, dict[str, object]]] = []
    hub = EgressHub(EgressConfig(), lambda kind, message, **data: events.append((kind, message, data)))

    class FakePush:
        class source:  # noqa: N801  (stands for the session)
            id = "s1"

        target = Target("https://sfu.example/whip/stream-key?k=1")

        attempts = 1
        state = EgressState.LIVE

    push: object = FakePush()
    hub.pushes["s1"] = push  # type: ignore[assignment]
    for state in (EgressState.CONNECTING, EgressState.LIVE, EgressState.RETRYING, EgressState.CONNECTING):
        hub._on_state(push, state, "why")  # type: ignore[arg-type]
    registry = CollectorRegistry()
    registry.register(hub.collector())
    text = generate_latest(registry).decode()
    assert 'livefuse_egress_state_changes_total{state="connecting"} 2.0' in text
    assert 'livefuse_egress_state_changes_total{state="failed"} 0.0' in text
    assert 'livefuse_egress_pushes{state="live"} 1.0' in text
    assert [e[2]["state"] for e in events] == ["connecting", "live", "retrying", "connecting"]
    assert all(e[0] == "egress" and e[2]["session_id"] == "s1" for e in events)
    assert all(e[2]["url"] == "https://sfu.example:443" and "stream-key" not in e[1] for e in events)
