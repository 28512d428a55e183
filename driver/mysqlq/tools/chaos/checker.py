"""The chaos checker: what was published, committed, handled and acked, against the guarantees."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mysqlq.tools.chaos import GROUPS, QUEUE_DB, RESULTS_DB, TOPIC


@dataclass
class Tally:
    kills: int = 0
    stops: int = 0
    restarts: int = 0
    conn_kills: int = 0
    crashes: int = 0
    in_flight_bound: int = 0
    events: list[str] = field(default_factory=list)


def check(query: Any, tally: Tally) -> dict[str, Any]:
    """The checker: lost, rolled back and delivered, order, duplicates (see the module doc).

    The sets are read once and compared in Python: cheap for hundreds of thousands of rows,
    where correlated NOT EXISTS over ids without an index would scan quadratically."""
    q, r = QUEUE_DB, RESULTS_DB
    log_rows = query(
        f"SELECT partition_id, msg_offset, message_id FROM `{q}`.queue_messages WHERE topic = %s",
        (TOPIC,),
    )
    in_log = {msg_id for _, _, msg_id in log_rows}
    watermarks: dict[str, dict[int, int]] = {g: {} for g in GROUPS}
    for group, pid, acked in query(
        f"SELECT group_name, partition_id, offset_acked FROM `{q}`.queue_offsets"
        " WHERE group_name IN ('fast', 'strict')"
    ):
        watermarks[group][int(pid)] = int(acked)
    dlq: dict[str, set[str]] = {g: set() for g in GROUPS}
    for group, msg_id in query(
        f"SELECT origin_group, origin_message_id FROM `{q}`.queue_messages WHERE origin_topic = %s",
        (TOPIC,),
    ):
        dlq.setdefault(group, set()).add(msg_id)
    handled_rows = query(
        f"SELECT grp, msg_key, msg_offset, msg_id, at_ms > visible_until FROM `{r}`.handled"
        " ORDER BY id"
    )
    handled: dict[str, set[str]] = {g: set() for g in GROUPS}
    for group, _, _, msg_id, _ in handled_rows:
        handled[group].add(msg_id)
    lost = 0
    for group in GROUPS:
        for pid, offset, msg_id in log_rows:
            done = watermarks[group].get(int(pid), 0) >= int(offset)
            seen = msg_id in handled[group] or msg_id in dlq[group]
            lost += not (done and seen)
    outcomes: dict[str, list[str]] = {"committed": [], "rolled_back": [], "unknown": []}
    for msg_id, outcome in query(f"SELECT msg_id, outcome FROM `{r}`.published"):
        outcomes[outcome].append(msg_id)
    # a publish the publisher saw commit must be in the log
    lost += sum(msg_id not in in_log for msg_id in outcomes["committed"])
    every_handled = set().union(*handled.values())
    rolled_back_seen = sum(
        msg_id in in_log or msg_id in every_handled for msg_id in outcomes["rolled_back"]
    )
    duplicates = len(handled_rows) - sum(len(ids) for ids in handled.values())
    # strict order: per partition, handler starts in offset order, no step back, no skip
    violations = late = 0
    top: dict[str, int] = {}
    for group, key, offset, _, is_late in handled_rows:
        if group != "strict":
            continue
        if is_late:
            late += 1
            continue
        last = top.get(key, 0)
        if offset < last or offset > last + 1:
            violations += 1
        top[key] = max(last, offset)
    return {
        "messages": len(log_rows),
        "rolled_back": len(outcomes["rolled_back"]),
        "unknown_outcome": len(outcomes["unknown"]),
        "kills": tally.kills,
        "stops": tally.stops,
        "restarts": tally.restarts,
        "conn_kills": tally.conn_kills,
        "lost": lost,
        "rolled_back_delivered": rolled_back_seen,
        "order_violations": violations,
        "late_starts": late,
        "duplicates": duplicates,
        "duplicate_bound": tally.in_flight_bound,
        "dlq": sum(len(ids) for ids in dlq.values()),
        "handled": len(handled_rows),
        "crashes": tally.crashes,
    }


def tally_from_events(query: Any) -> Tally:
    """The faults as the controller recorded them in the results database."""
    tally = Tally()
    for kind, count, in_flight in query(
        f"SELECT kind, COUNT(*), SUM(in_flight) FROM `{RESULTS_DB}`.chaos_events GROUP BY kind"
    ):
        tally.in_flight_bound += int(in_flight)
        if kind == "kill":
            tally.kills = int(count)
        elif kind == "sigstop":
            tally.stops = int(count)
        elif kind == "restart":
            tally.restarts = int(count)
        elif kind == "conn_kill":
            tally.conn_kills = int(count)
    return tally


def summary_line(s: dict[str, Any]) -> str:
    return (
        f"chaos: messages={s['messages']} kills={s['kills']} restarts={s['restarts']}"
        f" stops={s['stops']} conn_kills={s['conn_kills']} lost={s['lost']}"
        f" order_violations={s['order_violations']} duplicates={s['duplicates']}"
        f" (bound {s['duplicate_bound']}) rolled_back={s['rolled_back']}"
        f" rolled_back_delivered={s['rolled_back_delivered']}"
        f" unknown_outcome={s['unknown_outcome']} late_starts={s['late_starts']}"
        f" dlq={s['dlq']} crashes={s['crashes']} drained={s['drained']} drain_s={s['drain_s']}"
        f" elapsed_s={s['elapsed_s']}"
    )


def passed(s: dict[str, Any]) -> bool:
    return (
        s["drained"]
        and s["lost"] == 0
        and s["rolled_back_delivered"] == 0
        and s["order_violations"] == 0
        and s["duplicates"] <= s["duplicate_bound"]
        and s["restarts"] >= 1
        and s["crashes"] == 0
    )
