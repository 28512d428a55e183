"""Each page's figures: the reader's rows with the history's rates and charts added.

Framework-free: ``mysqlq.dashboard.app`` renders these dicts with Jinja2 templates, and the JSON
endpoints return them (``jsonable``) as they are.
"""

from __future__ import annotations

from typing import Any

from mysqlq.dashboard import views
from mysqlq.dashboard.history import History, Point, rates
from mysqlq.dashboard.reader import Reader

__all__ = ["Pages", "jsonable"]

MINUTE = 60.0


def _points(series: list[Point], scale: int = 1) -> list[list[float]]:
    return [[p.at_ms, p.value / scale] for p in series]


def jsonable(value: Any) -> Any:
    """A page's dict for a JSON endpoint: charts left out, bytes as text."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items() if not isinstance(v, views.Chart)}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return value


def _age(now: int, at: int) -> int:
    """ms since ``at``; 0, not negative, for a row written after ``now`` was read (a heartbeat
    committed between the dashboard's clock read and its read of the rows)."""
    return max(0, now - at)


class Pages:
    def __init__(self, reader: Reader, history: History) -> None:
        self.reader = reader
        self.history = history

    def _span(self) -> int:
        return self.history.window_ms

    # figures shared by the overview and a group's page ------------------------------------

    def _topic(self, t: dict[str, Any], now: int) -> dict[str, Any]:
        series = self.history.get("published", (t["topic"],))
        t["oldest_age_ms"] = None if t["oldest_at"] is None else _age(now, t["oldest_at"])
        t["rate_1m"] = self.history.publish_rate(t["topic"], MINUTE)
        t["rate_5m"] = self.history.publish_rate(t["topic"], 5 * MINUTE)
        t["rate_chart"] = views.chart(rates(series), scale=1000)
        return t

    def _group(self, g: dict[str, Any]) -> dict[str, Any]:
        key = (g["topic"], g["group_name"])
        lag = self.history.get("lag", key)
        acked = rates(self.history.get("acked", key))
        g["throughput_1m"] = self.history.throughput(g["topic"], g["group_name"], MINUTE)
        g["lag_chart"] = views.chart(lag)
        g["throughput_chart"] = views.chart(acked, scale=1000)
        g["history"] = {"lag": _points(lag), "throughput": _points(acked, 1000)}
        return g

    @staticmethod
    def _subscriber(s: dict[str, Any], now: int) -> dict[str, Any]:
        s["heartbeat_age_ms"] = _age(now, s["heartbeat_at"])
        s["running_ms"] = _age(now, s["started_at"])
        return s

    # pages --------------------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        data = self.reader.overview()
        now = data["now"]
        for t in data["topics"]:
            self._topic(t, now)
        for g in data["groups"]:
            self._group(g)
        for s in data["subscribers"]:
            self._subscriber(s, now)
        data["history_samples"] = self.history.samples
        data["history_window_ms"] = self._span()
        return data

    def group(self, topic: str, group: str) -> dict[str, Any] | None:
        data = self.reader.group(topic, group)
        if data is None:
            return None
        now = data["now"]
        self._group(data["group"])
        for p in data["partitions"]:
            p["label"] = views.partition_label(p)
            held = p["held"]
            p["lease_age_ms"] = _age(now, p["leased_at"]) if held and p["leased_at"] else None
            p["lease_expires_in_ms"] = p["expires_at"] - now if held else None
            p["in_flight"] = (p["cursor_pending"] or 0) if (p["cursor_until"] or 0) > now else 0
        for s in data["subscribers"]:
            self._subscriber(s, now)
        # the big charts of the group's page
        key = (topic, group)
        data["lag_chart"] = views.chart(self.history.get("lag", key), width=560, height=120)
        data["throughput_chart"] = views.chart(
            rates(self.history.get("acked", key)),
            width=560,
            height=120,
            scale=1000,
        )
        data["history_window_ms"] = self._span()
        return data

    def dlq(self, dlq_topic: str, origin_group: str | None) -> dict[str, Any] | None:
        if not self.reader.topic_exists(dlq_topic):
            return None
        data = self.reader.dlq_entries(dlq_topic, origin_group)
        now = data["now"]
        # the entry queue_redrive sends next: a redrive of it sends exactly one
        first = self.reader.next_in_line(dlq_topic) if data["pending"] else None
        for e in data["entries"]:
            e["age_ms"] = None if e["failed_at"] is None else _age(now, e["failed_at"])
            e["next_in_line"] = (e["partition_id"], e["offset"]) == first
        data["topic"] = dlq_topic
        data["origin_group"] = origin_group
        return data

    def entry(self, dlq_topic: str, partition_id: int, offset: int) -> dict[str, Any] | None:
        row = self.reader.dlq_entry(dlq_topic, partition_id, offset)
        if row is None:
            return None
        payload = bytes(row.pop("payload"))
        return {
            "topic": dlq_topic,
            "entry": row,
            "payload": views.payload_views(payload),
            "metadata": views.metadata_pretty(row.get("metadata")),
        }

    def raw_payload(self, dlq_topic: str, partition_id: int, offset: int) -> bytes | None:
        row = self.reader.dlq_entry(dlq_topic, partition_id, offset)
        return None if row is None else bytes(row["payload"])

    def redrive_plan(
        self, dlq_topic: str, partition_id: int | None, offset: int | None
    ) -> dict[str, Any] | None:
        """What a redrive would send: all entries waiting (no position), or those waiting up to
        and including one entry. None when the DLQ topic or the entry does not exist."""
        if not self.reader.topic_exists(dlq_topic):
            return None
        plan: dict[str, Any] = {"topic": dlq_topic, "partition_id": partition_id, "offset": offset}
        if partition_id is None or offset is None:
            plan["count"] = self.reader.dlq_pending(dlq_topic)
            plan["entry"] = None
            plan["ahead"] = []
            return plan
        entry = self.reader.dlq_entry(dlq_topic, partition_id, offset)
        if entry is None:
            return None
        entry.pop("payload", None)
        # queue_redrive_one sends exactly this entry, unless it went back already
        plan["entry"] = entry
        plan["ahead"] = []
        plan["count"] = 0 if entry["redriven"] else 1
        return plan

    def seek_plan(self, topic: str, group: str, to: str) -> dict[str, Any] | None:
        data = self.reader.group(topic, group)
        if data is None:
            return None
        return {"topic": topic, "group_name": group, "to": to, "group": data["group"]}
