"""Prometheus metrics of one app, on its own registry so several apps (tests) never collide."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from seal.bfcl.isolation import leftover_instances
from seal.env.store import EpisodeStore

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
EPISODE_EVENTS = ("created", "steps", "finished", "deleted", "reaped", "rejected_full", "evolved")


class _StoreCollector(Collector):
    """Reads the store at scrape time, so the numbers are never stale and cost nothing per request."""

    def __init__(self, store: EpisodeStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "seal_env_episodes_open",
            "Episodes held (created, not deleted or reaped)",
            value=self.store.open_count,
        )
        yield GaugeMetricFamily(
            "seal_env_interface_version",
            "Version of the current interface Ω",
            value=self.store.interface.version,
        )
        yield GaugeMetricFamily(
            "seal_env_bfcl_global_instances",
            "bfcl-eval instances left in module globals (should stay 0: a leak otherwise)",
            value=len(leftover_instances()),
        )
        events = CounterMetricFamily("seal_env_episode_events", "Episode lifecycle events", labels=["event"])
        counts = self.store.counters()
        for event in EPISODE_EVENTS:
            events.add_metric([event], counts.get(event, 0))
        yield events


class ServiceMetrics:
    def __init__(self, store: EpisodeStore) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "seal_env_requests",
            "HTTP requests by route template, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "seal_env_request_seconds",
            "Request latency in the service, by route template and method",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_StoreCollector(store))

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route, method).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
