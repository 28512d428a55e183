"""The dashboard over plain HTTP, against a database with real traffic (helpers.dashboard):
what each page and JSON endpoint shows, the history's rates, and the actions' forms.

Error statuses, tokens and proxies are in test_errors_and_security.py; the browser in
test_browser.py.
"""

from __future__ import annotations

import http.cookiejar
import json
import re

from helpers.dashboard import DLQ_TOPIC, GROUP, IDLE_GROUP, MESSAGES, POISON, TOPIC, fetch
from helpers.support import wait_until

import mysqlq


def api(dashboard, path: str) -> dict:
    reply = fetch(dashboard.url + path)
    assert reply.status == 200, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    return reply.json()


def by(rows: list[dict], **match) -> dict:
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, rows)
    return found[0]


def test_overview_page_shows_topics_groups_subscribers_and_dead_letters(dashboard, traffic):
    reply = fetch(dashboard.url)
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/html")
    page = reply.text
    assert f'data-topic="{TOPIC}"' in page
    # the two groups' rows, each with its lag
    billing = re.search(rf'<tr data-group="{GROUP}" data-topic="{TOPIC}">(.*?)</tr>', page, re.S)
    audit = re.search(rf'<tr data-group="{IDLE_GROUP}" data-topic="{TOPIC}">(.*?)</tr>', page, re.S)
    assert billing and audit
    assert re.search(r'class="num lag">0<', billing.group(1))
    assert re.search(rf'class="num lag">{traffic.lag(IDLE_GROUP)}<', audit.group(1))
    assert 'data-subscriber="worker-1"' in page
    assert f'href="/dlq?topic={DLQ_TOPIC}"' in page
    # no script inline: the page's one script is the dashboard's own file
    assert "<script>" not in page and 'src="/static/dashboard.js"' in page
    assert "default-src 'self'" in reply.headers["content-security-policy"]
    assert fetch(dashboard.url + "static/dashboard.js").status == 200


def test_api_overview_has_the_figures(dashboard, traffic):
    data = api(dashboard, "api/overview")
    topic = by(data["topics"], topic=TOPIC)
    assert topic["kept"] >= MESSAGES and topic["partition_count"] == 3
    assert topic["oldest_at"] <= data["now"] and topic["oldest_age_ms"] >= 0
    assert by(data["topics"], topic=DLQ_TOPIC)["is_dlq"]
    billing = by(data["groups"], topic=TOPIC, group_name=GROUP)
    assert billing["unacked"] == traffic.lag(GROUP) == 0
    assert billing["live_subscribers"] == 1
    assert billing["dlq_entries"] >= 1
    audit = by(data["groups"], topic=TOPIC, group_name=IDLE_GROUP)
    assert audit["unacked"] == traffic.lag(IDLE_GROUP) > 0
    assert audit["live_subscribers"] == 0 and audit["dlq_entries"] == 0
    worker = by(data["subscribers"], subscriber="worker-1")
    assert worker["group_name"] == GROUP and worker["live"] and worker["held"] == 3
    assert worker["heartbeat_age_ms"] >= 0
    dlq = by(data["dlq"], dlq_topic=DLQ_TOPIC, origin_group=GROUP)
    assert dlq["origin_topic"] == TOPIC and dlq["entries"] >= 1


def test_the_history_gives_publish_rate_and_throughput(dashboard, traffic):
    """Messages published while the dashboard samples show as a publish rate of the topic and a
    throughput of the group that consumes them; the lag history has points."""
    with mysqlq.connect(traffic.dsn) as client:
        client.publish_batch(TOPIC, [{"payload": b"{}", "key": "customer-9"} for _ in range(12)])

    def rates():
        data = api(dashboard, "api/overview")
        topic = by(data["topics"], topic=TOPIC)
        billing = by(data["groups"], topic=TOPIC, group_name=GROUP)
        return (topic["rate_1m"] or 0) > 0 and (billing["throughput_1m"] or 0) > 0 and data

    data = wait_until(rates, timeout=20, interval=0.1, what="rates from the sampled history")
    billing = by(data["groups"], topic=TOPIC, group_name=GROUP)
    assert len(billing["history"]["lag"]) >= 2
    assert all(v >= 0 for _, v in billing["history"]["throughput"])
    wait_until(lambda: traffic.lag(GROUP) == 0, timeout=20, what="the group to catch up")
    # the overview's sparklines are SVG polylines once there are two samples
    assert "<polyline points=" in fetch(dashboard.url).text


def test_group_page_lists_partitions_with_holder_epoch_and_lease_age(dashboard, traffic):
    reply = fetch(dashboard.url + f"group?topic={TOPIC}&group={GROUP}")
    assert reply.status == 200
    page = reply.text
    rows = re.findall(r'<tr data-partition="(\d+)">(.*?)</tr>', page, re.S)
    assert len(rows) >= 3
    for _, cells in rows:
        assert '<td class="name">worker-1</td>' in cells
    data = api(dashboard, f"api/group?topic={TOPIC}&group={GROUP}")
    assert data["group"]["group_name"] == GROUP and data["group"]["live_subscribers"] == 1
    for p in data["partitions"]:
        assert p["held"] and p["leased_by"] == "worker-1"
        assert p["lease_epoch"] >= 1 and p["lease_age_ms"] >= 0
        assert p["lease_expires_in_ms"] > 0
    assert {p["partition_key"] for p in data["partitions"]} >= {
        "customer-0",
        "customer-1",
        "customer-2",
    }
    assert by(data["subscribers"], subscriber="worker-1")["held"] == len(data["partitions"])
    # the idle group: nobody holds its partitions, its lag is the whole topic
    idle = api(dashboard, f"api/group?topic={TOPIC}&group={IDLE_GROUP}")
    assert all(not p["held"] for p in idle["partitions"])
    assert sum(p["unacked"] for p in idle["partitions"]) == traffic.lag(IDLE_GROUP)
    # a refresh of the page: its live regions as JSON
    partial = fetch(dashboard.url + f"group?topic={TOPIC}&group={GROUP}&partial=1").json()
    assert set(partial["regions"]) == {"group_figures", "partitions", "group_subscribers"}
    assert "worker-1" in partial["regions"]["partitions"]


def dead_letter(traffic) -> dict:
    (entry,) = [e for e in traffic.dlq_entries() if e["origin_message_id"] == POISON]
    return entry


def test_dlq_page_and_entry_in_json_text_and_hex(dashboard, traffic):
    entry = dead_letter(traffic)
    where = f"topic={DLQ_TOPIC}&partition={entry['partition_id']}&offset={entry['msg_offset']}"
    page = fetch(dashboard.url + f"dlq?topic={DLQ_TOPIC}").text
    row = re.search(
        rf'<tr data-entry="{entry["partition_id"]}/{entry["msg_offset"]}">(.*?)</tr>', page, re.S
    )
    assert row, page
    assert "card declined: poison order" in row.group(1)
    assert f"{TOPIC} / {GROUP} @" in row.group(1)
    listed = api(dashboard, f"api/dlq?topic={DLQ_TOPIC}&group={GROUP}")
    assert any(e["id"] for e in listed["entries"])
    assert api(dashboard, f"api/dlq?topic={DLQ_TOPIC}&group=nobody")["entries"] == []

    default = fetch(dashboard.url + "dlq/entry?" + where)
    assert default.status == 200
    assert 'data-view="json"' in default.text  # a JSON payload opens as JSON
    assert "&#34;card&#34;: &#34;4000-0000-0000-0002&#34;" in default.text  # pretty, escaped
    assert "&#34;source&#34;: &#34;checkout&#34;" in default.text  # the metadata
    assert "card declined: poison order" in default.text
    text = fetch(dashboard.url + "dlq/entry?" + where + "&view=text").text
    assert 'data-view="text"' in text and "{&#34;order&#34;: &#34;poison&#34;" in text
    hexed = fetch(dashboard.url + "dlq/entry?" + where + "&view=hex").text
    assert 'data-view="hex"' in hexed and "00000000  7b 22 6f 72 64 65 72 22" in hexed
    raw = fetch(dashboard.url + "dlq/entry/raw?" + where)
    assert raw.status == 200 and raw.headers["content-type"] == "application/octet-stream"
    assert json.loads(raw.body) == {"order": "poison", "card": "4000-0000-0000-0002"}


def test_seek_through_the_confirmation_form(dashboard, traffic):
    """Seek the idle group to the end and back to the start: a GET shows the confirmation with
    the form's CSRF token (and sets its cookie); the POST moves the group."""
    jar = http.cookiejar.CookieJar()
    before = traffic.lag(IDLE_GROUP)
    assert before > 0
    confirm = fetch(
        dashboard.url + f"actions/seek?topic={TOPIC}&group={IDLE_GROUP}&to=end", jar=jar
    )
    assert confirm.status == 200 and f"lag of <strong>{before}</strong>" in confirm.text
    token = re.search(r'name="csrf" value="([^"]+)"', confirm.text).group(1)
    form = {"csrf": token, "topic": TOPIC, "group": IDLE_GROUP, "to": "end"}
    done = fetch(dashboard.url + "actions/seek", data=form, jar=jar)
    assert done.status == 303
    assert done.headers["location"] == f"/group?topic={TOPIC}&group={IDLE_GROUP}&done=seek&to=end"
    assert traffic.lag(IDLE_GROUP) == 0
    page = fetch(dashboard.url + done.headers["location"][1:], jar=jar).text
    assert "Moved the group to the end" in page
    done = fetch(dashboard.url + "actions/seek", data={**form, "to": "start"}, jar=jar)
    assert done.status == 303
    assert traffic.lag(IDLE_GROUP) == before


def test_redrive_of_one_entry_sends_that_entry_alone(dashboard, traffic):
    """Three dead letters of another topic: redriving the middle one from its confirmation form
    sends exactly it (queue_redrive_one), and the DLQ page marks only it redriven."""
    from helpers.support import Consumer, deliveries

    from mysqlq.connection import call

    conn = traffic.db()
    try:
        for i in range(3):
            call(conn, "queue_publish", "other", "k", f"o-{i}", b"x", None, 0)
        c = Consumer(conn, "g2", "other", "s")
        c.subscribe()
        c.tick()
        for m in c.fetch():
            call(conn, "queue_dead_letter", "g2", deliveries([m]), f"bad {m['id']}", None)
        cur = conn.cursor()
        cur.execute(
            "SELECT partition_id, msg_offset FROM queue_messages WHERE topic = 'other_dlq'"
            " ORDER BY msg_offset"
        )
        entries = cur.fetchall()
        cur.close()
        pid, middle = entries[1]
        jar = http.cookiejar.CookieJar()
        confirm = fetch(
            dashboard.url + f"actions/redrive?topic=other_dlq&partition={pid}&offset={middle}",
            jar=jar,
        )
        assert confirm.status == 200 and "Yes, redrive 1 entry" in confirm.text
        token = re.search(r'name="csrf" value="([^"]+)"', confirm.text).group(1)
        form = {"csrf": token, "topic": "other_dlq", "partition": pid, "offset": middle}
        done = fetch(dashboard.url + "actions/redrive", data=form, jar=jar)
        assert done.status == 303 and "count=1" in done.headers["location"]
        cur = conn.cursor()
        cur.execute(
            "SELECT origin_message_id FROM queue_messages WHERE topic = 'other'"
            " AND target_group = 'g2'"
        )
        assert [r[0] for r in cur.fetchall()] == ["o-1"]
        cur.close()
        listed = api(dashboard, "api/dlq?topic=other_dlq")
        marks = {e["origin_message_id"]: e["redriven"] for e in listed["entries"]}
        assert marks == {"o-0": 0, "o-1": 1, "o-2": 0}
        # again: nothing more goes back
        confirm = fetch(
            dashboard.url + f"actions/redrive?topic=other_dlq&partition={pid}&offset={middle}",
            jar=jar,
        )
        assert "was redriven already" in confirm.text
    finally:
        conn.close()


def test_an_age_is_never_negative() -> None:
    """A heartbeat committed after the dashboard read its clock (the server's, in ms) is 0 ms old,
    not -1 (seen once on MySQL: the overview said -1)."""
    from mysqlq.dashboard.pages import Pages

    row = Pages._subscriber({"heartbeat_at": 1_001, "started_at": 900}, 1_000)
    assert (row["heartbeat_age_ms"], row["running_ms"]) == (0, 100)
