"""A store's figures for Prometheus: ``serve``'s ``GET /metrics`` and the embedder's own
registry (``relaystore.metrics``). Needs ``prometheus-client`` (``relaystore[metrics]``).

Guarantees:

* Every scrape reads one fresh :meth:`~relaystore.EventStore.metrics` snapshot; nothing
  is kept between scrapes.
* ``relaystore_info{store_id, role}`` (a gauge of 1) says which process the figures
  describe: ``role`` is ``writer`` for a store this process writes (the supervisor's,
  ``replay``'s) and ``reader`` for a read-only one (``serve``'s, ``publish``'s), whose
  writer figures are all zero; ``store_id`` is the store's own id, the same in every
  process that opens it, so a dashboard joins the writer's and the server's series on it.
* Counts since the store opened are counters (``relaystore_<name>_total``); the rest are
  gauges (``relaystore_<name>``), with the names of :class:`StoreMetrics`' fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, Protocol

import msgspec
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..domain.reports import StoreMetrics

__all__ = ["MeasuredStore", "StoreCollector", "prometheus_text"]

Role = Literal["writer", "reader"]

COUNTERS = frozenset(
    {
        "commits",
        "messages_written",
        "relay_events_applied",
        "api_events_written",
        "busy_refusals",
        "relay_lines_held",
        "projector_loads",
        "projector_starts",
        "worker_restarts",
    }
)
METRIC_HELP = {
    "writer_inbox_depth": "Messages waiting in the writer's inbox.",
    "live_projectors": "Sessions holding a projector.",
    "followers": "Open follows of the feed.",
    "commits": "Commits by this process's writer since it opened the store (0 read-only).",
    "commit_latency_p50_ms": "Median commit latency over recent commits, in milliseconds.",
    "commit_latency_p99_ms": "99th percentile commit latency over recent commits, in milliseconds.",
    "batch_size_mean": "Mean messages per commit over recent commits.",
    "batch_size_max": "Most messages in one recent commit.",
    "messages_written": "Messages this process's writer committed (0 read-only).",
    "relay_events_applied": "Relay events this process projected (0 read-only).",
    "api_events_written": "API events this process's writer wrote (0 read-only).",
    "latest_seq": "The newest committed API event seq, read from the store.",
    "sessions_behind": "Sessions whose projection waits behind their relay log, read from the store.",
    "relay_lines_held": "Relay lines kept in the log without projecting them since the store opened.",
    "projector_loads": "Sessions' projections loaded from the store since the store opened.",
    "projector_starts": "Projectors started since the store opened.",
    "worker_restarts": "Projection worker processes started again after one died.",
}


class MeasuredStore(Protocol):
    """What a collector reads: :class:`~relaystore.EventStore` (or ``AsyncEventStore.sync``)."""

    @property
    def read_only(self) -> bool: ...

    def metrics(self) -> StoreMetrics: ...


class StoreCollector(Collector):
    """The figures of ``store`` for a Prometheus registry (see the module doc).

    Register it in the embedder's registry::

        from prometheus_client import REGISTRY
        from relaystore.metrics import StoreCollector

        REGISTRY.register(StoreCollector(store))

    ``role`` overrides what the store says of itself (``writer`` unless it was opened
    read-only).
    """

    def __init__(self, store: MeasuredStore, *, role: Role | None = None) -> None:
        self._store = store
        self._role: Role = role or ("reader" if store.read_only else "writer")

    def collect(self) -> Iterator[Metric]:
        figures = self._store.metrics()
        info = GaugeMetricFamily(
            "relaystore_info",
            "Which store and which process these figures describe (always 1).",
            labels=["store_id", "role"],
        )
        info.add_metric([figures.store_id, self._role], 1)
        yield info
        for field in msgspec.structs.fields(StoreMetrics):
            value = getattr(figures, field.name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue
            help_text = METRIC_HELP.get(field.name, field.name.replace("_", " "))
            family = CounterMetricFamily if field.name in COUNTERS else GaugeMetricFamily
            yield family(f"relaystore_{field.name}", help_text, value=value)


def prometheus_text(store: MeasuredStore, *, role: Role | None = None) -> bytes:
    """One scrape of ``store`` in the Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)  # one per scrape: no shared state
    registry.register(StoreCollector(store, role=role))
    return bytes(generate_latest(registry))
