"""Audio relay numbers for /api/stats (the dashboard reads them there) and /metrics.

Why beside the monitor's snapshot and not in it: audio never passes the monitor (no frames, no stages); its
counters live in each session's `AudioRelay`. This section sums them at read time into one `AudioTotals`
(data), which both exporters format, so JSON and Prometheus cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


@dataclass(frozen=True)
class AudioTotals:
    sessions_with_audio: int = 0
    viewers_with_audio: int = 0
    packets_in: int = 0  # from publishers (open sessions)
    packets_relayed: int = 0  # packet x viewer deliveries
    packets_dropped: int = 0  # a viewer's sender fell behind (oldest dropped)
    sender_reports_stamped: int = 0  # audio + video SRs carrying capture time (lip sync)

    @staticmethod
    def of(per_session: Iterable[Mapping[str, Any]]) -> AudioTotals:
        rows = list(per_session)
        return AudioTotals(
            sessions_with_audio=sum(1 for r in rows if r.get("audio")),
            viewers_with_audio=sum(int(r.get("audio_viewers", 0)) for r in rows),
            packets_in=sum(int(r.get("audio_packets_in", 0)) for r in rows),
            packets_relayed=sum(int(r.get("audio_packets_relayed", 0)) for r in rows),
            packets_dropped=sum(int(r.get("audio_dropped", 0)) for r in rows),
            sender_reports_stamped=sum(int(r.get("sender_reports_stamped", 0)) for r in rows),
        )


_COUNTED = ("audio_packets_in", "audio_packets_relayed", "audio_dropped", "sender_reports_stamped")


class AudioSection:
    """`name` in /api/stats; `data()` its JSON; `collector()` its Prometheus families."""

    name = "audio"

    def __init__(self, per_session: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        self._per_session = per_session

    def totals(self) -> AudioTotals:
        return AudioTotals.of(self._per_session())

    def data(self) -> dict[str, Any]:
        return asdict(self.totals())

    def collector(self) -> Collector:
        """Prometheus counters that keep what closed sessions counted (the JSON shows open sessions)."""
        from gateway.monitoring.prometheus import MonotonicTotals

        carried = MonotonicTotals()

        def totals() -> AudioTotals:
            rows = list(self._per_session())
            alive = {
                str(r.get("session", n)): {k: float(r.get(k, 0)) for k in _COUNTED}
                for n, r in enumerate(rows)
            }
            ever = carried.update(alive)
            now = AudioTotals.of(rows)
            return AudioTotals(
                sessions_with_audio=now.sessions_with_audio,
                viewers_with_audio=now.viewers_with_audio,
                packets_in=int(ever.get("audio_packets_in", 0)),
                packets_relayed=int(ever.get("audio_packets_relayed", 0)),
                packets_dropped=int(ever.get("audio_dropped", 0)),
                sender_reports_stamped=int(ever.get("sender_reports_stamped", 0)),
            )

        return _AudioCollector(totals)


class _AudioCollector(Collector):
    def __init__(self, totals: Callable[[], AudioTotals]) -> None:
        self._totals = totals

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        t = self._totals()
        yield GaugeMetricFamily(
            "livefuse_audio_sessions", "Open sessions relaying publisher audio", value=t.sessions_with_audio
        )
        yield GaugeMetricFamily(
            "livefuse_audio_viewers", "WHEP viewers receiving relayed audio", value=t.viewers_with_audio
        )
        packets = CounterMetricFamily(
            "livefuse_audio_packets", "Opus packets since start, by fate", labels=["fate"]
        )
        packets.add_metric(["received"], t.packets_in)
        packets.add_metric(["relayed"], t.packets_relayed)
        packets.add_metric(["dropped"], t.packets_dropped)
        yield packets
        yield CounterMetricFamily(
            "livefuse_sender_reports_stamped",
            "RTCP sender reports rewritten to capture time since start",
            value=t.sender_reports_stamped,
        )
