"""The dashboard's formatting and history, without a server: rates, ages, charts, payloads."""

from __future__ import annotations

from mysqlq.dashboard import views
from mysqlq.dashboard.history import History, Point, rate_per_second, rates


def test_rates_and_durations_read_as_people_read_them():
    assert views.rate(None) == "—" and views.rate(0) == "0/s"
    assert views.rate(250.4) == "250/s" and views.rate(2.44) == "2.4/s"
    assert views.rate(0.05) == "3.0/min" and views.rate(0.5) == "30/min"
    assert views.duration(850) == "850 ms" and views.duration(12_000) == "12 s"
    assert views.duration(250_000) == "4 min 10 s" and views.duration(3 * 3600_000) == "3 h"
    assert views.duration(52 * 3600_000) == "2 d 4 h" and views.duration(-5) == "0 ms"
    assert views.timestamp(0) == "1970-01-01 00:00:00 UTC"
    assert views.number(1234567) == "1,234,567" and views.number(None) == "—"


def test_counters_become_rates_and_falls_count_as_nothing():
    points = [Point(0, 100), Point(1000, 110), Point(2000, 50), Point(4000, 70)]
    # +10, a fall (a seek backwards: no throughput), +20, over 4 s
    assert rate_per_second(points) == 7.5
    assert rate_per_second(points, since_ms=2000) == 10.0
    assert rate_per_second(points[:1]) is None
    assert [p.value for p in rates(points)] == [10_000, 0, 10_000]


def test_the_history_keeps_its_window_and_forgets_what_is_gone():
    history = History(window=10)

    def overview(now, published):
        return {
            "now": now,
            "topics": [{"topic": "t", "published": published}],
            "groups": [{"topic": "t", "group_name": "g", "unacked": 3, "acked_total": 7}],
        }

    for i in range(30):
        history.record(overview(i * 1000, i * 5))
    assert len(history.get("published", ("t",))) == 11  # the last 10 s
    assert history.publish_rate("t", 60) == 5.0
    assert history.throughput("t", "g", 60) == 0.0
    history.record({"now": 60_000, "topics": [], "groups": []})
    assert history.get("published", ("t",)) == [] and history.samples == 31


def test_a_chart_scales_its_series_into_its_box():
    c = views.chart([Point(0, 0), Point(30_000, 10), Point(60_000, 5)], width=100, height=24)
    assert c.points == "0.0,22.0 50.0,2.0 100.0,12.0" and c.top == 10 and c.last == 5
    young = views.chart([Point(0, 1), Point(1000, 1)], width=100, height=24)
    assert young.points.startswith("98.3,") and young.span_ms == 60_000  # not stretched
    assert views.chart([]).empty and views.chart([Point(0, 1)]).empty


def test_payload_views():
    j = views.payload_views(b'{"a": [1, 2]}')
    assert j["default"] == "json" and j["json"] == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert j["text"] == '{"a": [1, 2]}' and j["hex"].startswith("00000000  7b 22 61 22")
    t = views.payload_views("héllo".encode())
    assert t["default"] == "text" and t["json"] is None and t["text"] == "héllo"
    b = views.payload_views(b"\x00\xff\xfe binary")
    assert b["default"] == "hex" and b["json"] is None and b["text"] is None
    assert b["hex"] == "00000000  00 ff fe 20 62 69 6e 61 72 79                    ... binary"
    big = views.payload_views(b"x" * (views.PAYLOAD_SHOWN + 10))
    assert big["truncated"] and len(big["text"]) == views.PAYLOAD_SHOWN
    assert big["hex"].count("\n") == views.PAYLOAD_SHOWN // 16 - 1
    assert views.metadata_pretty('{"k": 1}') == '{\n  "k": 1\n}'
    assert views.metadata_pretty(None) is None
    assert views.partition_label({"slot": 3, "partition_key": ""}) == "slot 3"
    assert views.partition_label({"slot": -1, "partition_key": "k"}) == "k"
