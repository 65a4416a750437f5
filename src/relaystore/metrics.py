"""A store's figures in the embedder's own Prometheus registry (``relaystore[metrics]``).

``relaystore serve`` opens the store read-only, so its ``GET /metrics`` describes the
server (``relaystore_info{role="reader"}``); the writer's figures (commits, latencies,
projectors) live in the process that writes, the supervisor. It exports them itself::

    from prometheus_client import REGISTRY, start_http_server
    from relaystore.metrics import StoreCollector

    REGISTRY.register(StoreCollector(store))   # relaystore_info{role="writer"} and the rest
    start_http_server(9108)

See :mod:`relaystore.actors.prometheus` for the families. Importing this module without
``prometheus-client`` raises ``ImportError`` naming the extra.
"""

from __future__ import annotations

from relaystore.domain.wording import install_extra

try:
    from relaystore.actors.prometheus import MeasuredStore, StoreCollector, prometheus_text
except ImportError as exc:  # pragma: no cover - the metrics extra is part of the test set
    raise ImportError(
        f"relaystore.metrics needs prometheus-client: {install_extra('metrics')} ({exc})"
    ) from exc

__all__ = ["MeasuredStore", "StoreCollector", "prometheus_text"]
