"""Prometheus metrics of a subscriber (``pip install mysqlq[metrics]``): deliveries, outcomes,
handler time and the lag of the partitions it holds."""

from __future__ import annotations

import json
from typing import Any, Protocol

from mysqlq import _sql
from mysqlq.errors import Error

__all__ = ["SubscriberMetrics"]


class _Caller(Protocol):
    def rows(self, sql: str, args: tuple) -> list[dict]: ...


class SubscriberMetrics:
    """Prometheus metrics (``pip install mysqlq[metrics]``); pass a CollectorRegistry, or True
    for the default registry."""

    def __init__(self, registry: Any, topic: str, group: str) -> None:
        try:
            import prometheus_client as prom
        except ImportError:  # pragma: no cover
            raise Error(
                "metrics need the prometheus-client package: pip install mysqlq[metrics]"
            ) from None
        if registry is True:
            registry = prom.REGISTRY
        kw = {"registry": registry, "labelnames": ["topic", "group"]}
        self._labels = {"topic": topic, "group": group}
        self.delivered_c = prom.Counter("mysqlq_delivered", "Messages delivered", **kw)
        self.acked = prom.Counter("mysqlq_acked", "Messages acked", **kw)
        self.nacked = prom.Counter("mysqlq_nacked", "Messages nacked", **kw)
        self.dead = prom.Counter("mysqlq_dead_lettered", "Messages dead-lettered", **kw)
        self.handler_h = prom.Histogram("mysqlq_handler_seconds", "Handler time", **kw)
        self.given_up_c = prom.Counter(
            "mysqlq_handlers_given_up",
            "Handlers still running at max_handler_time: their message was nacked, their thread"
            " replaced",
            **kw,
        )
        self.lag_g = prom.Gauge(
            "mysqlq_partition_lag",
            "Messages not yet acked in a held partition",
            registry=registry,
            labelnames=["topic", "group", "partition_id"],
        )

    @property
    def delivered(self) -> Any:
        return self.delivered_c.labels(**self._labels)

    @property
    def given_up(self) -> Any:
        return self.given_up_c.labels(**self._labels)

    @property
    def handler_seconds(self) -> Any:
        return self.handler_h.labels(**self._labels)

    def outcome(self, outcome: str, n: int) -> None:
        counter = {"ack": self.acked, "nack": self.nacked, "dead_letter": self.dead}.get(outcome)
        if counter is not None:
            counter.labels(**self._labels).inc(n)

    def lag(self, link: _Caller, held: dict[int, int]) -> None:
        if not held:
            return
        rows = link.rows(_sql.LAG, (self._labels["group"], json.dumps(sorted(held))))
        for r in rows:
            self.lag_g.labels(partition_id=str(r["partition_id"]), **self._labels).set(r["unacked"])
