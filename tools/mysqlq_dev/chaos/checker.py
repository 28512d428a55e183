"""The chaos checker: what was published, committed, handled, acked and dead-lettered, against the
guarantees (see the package documentation for each check)."""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from mysqlq_dev.chaos import (
    EFFECTS_GROUP,
    EFFECTS_TABLE,
    EXPIRED,
    LEGACY_GROUPS,
    MAX_ATTEMPTS,
    MAX_HANDLER_S,
    QUEUE_DB,
    RESULTS_DB,
    TOPIC,
    VISIBILITY_S,
    explicit_reason,
    given_up_error,
    mode_of,
    poison_last_error,
)

# a handler start recorded this long after its worker was frozen (stall, server restart) is still
# taken for one begun before: the recording insert retries with backoff up to 1 s
FROZEN_GRACE_MS = 5_000
# a hung run is given up MAX_HANDLER_S after its start; its record may lag the start a little
GIVE_UP_SLACK_MS = 1_000
# a KILLed connection's event is recorded after the KILL returned: a transaction that failed on it
# may record its failure first (seen on MySQL: 9 ms before)
KILL_SLACK_MS = 5_000
# modes whose handler nacks (raises, or is given up): their retries may follow later offsets (G7)
NACKED = ("poison", "hang", "hang_last")
# modes that must end in every group's DLQ
DEAD_LETTERED = ("poison", "hang_last", "explicit")
# modes whose effects transaction commits once (the row and the ack); the others never commit one
WRITTEN = ("normal", "slow", "hang")
# how an effects transaction ended when it failed on the database (its message is nacked, or comes
# back after its visibility when the commit's outcome was lost)
TX_FAILED = ("lost_connection", "error")
# an effects transaction's error (as the worker records it) that says the server aborted it
ABORTED = re.compile(r"(in|begin): (Deadlock|LockTimeout|CommitFailed): ")


@dataclass
class Tally:
    kills: int = 0
    stops: int = 0
    restarts: int = 0
    conn_kills: int = 0
    crashes: int = 0
    in_flight_bound: int = 0
    events: list[str] = field(default_factory=list)


@dataclass
class Run:
    """One handler run, as its handler recorded it (server clock, epoch ms)."""

    group: str
    key: str
    offset: int
    msg_id: str
    attempt: int
    worker: str
    visible_until: int
    at_ms: int
    run_id: str = ""

    @property
    def fetched_at(self) -> int:
        return self.visible_until - round(VISIBILITY_S * 1000)

    @property
    def late(self) -> bool:
        """Started after the deadline its fetch gave it (keepalives may have moved it since)."""
        return self.at_ms > self.visible_until


class Faults:
    """When each fault happened (from chaos_events): kills and stalls by worker, restarts."""

    def __init__(self, events: list[tuple[str, str, int]]) -> None:
        self.killed: dict[str, int] = {}
        self.stalled: dict[str, list[float]] = {}  # worker -> [stopped, resumed]
        self.restarts: list[list[float]] = []  # [down, up]
        self.times: list[int] = []  # every fault that can leave a delivery unsettled
        # server ids of the KILLed connections, and when (ids start again after a restart)
        self.conn_killed: dict[int, list[int]] = collections.defaultdict(list)
        self.events = events
        for kind, detail, at in events:
            if kind == "conn_kill" and detail.startswith("connection "):
                self.conn_killed[int(detail.split()[1])].append(at)
            if kind == "kill":
                self.killed[detail] = at
            elif kind == "sigstop":
                self.stalled[detail] = [at, math.inf]
            elif kind == "sigcont" and detail in self.stalled:
                self.stalled[detail][1] = at
            elif kind == "restart":
                self.restarts.append([at, math.inf])
            elif kind == "restarted" and self.restarts:
                self.restarts[-1][1] = at
            if kind in ("kill", "sigstop", "restart", "conn_kill"):
                self.times.append(at)

    def frozen(self, worker: str, lo: float, hi: float) -> list[list[float]]:
        """The windows in which ``worker`` could do nothing (its stall, the server's restart) that
        overlap ``[lo, hi]``."""
        windows = list(self.restarts)
        if worker in self.stalled:
            windows.append(self.stalled[worker])
        return [w for w in windows if w[0] <= hi and w[1] >= lo]

    def disturbed(self, worker: str, lo: float, hi: float) -> bool:
        """Whether ``worker`` was killed, stopped, or cut off by the restart within ``[lo, hi]``:
        what it held then may have expired unsettled."""
        killed = self.killed.get(worker)
        return (killed is not None and lo <= killed <= hi) or bool(self.frozen(worker, lo, hi))

    def near(self, lo: float, hi: float, slack: float = 10_000) -> list[tuple[str, str, int]]:
        """Every recorded fault within ``slack`` ms of ``[lo, hi]`` (for the report)."""
        return [e for e in self.events if lo - slack <= e[2] <= hi + slack]

    def any_between(self, lo: float, hi: float) -> bool:
        return any(lo <= t <= hi for t in self.times)

    def cut_off(self, conn_id: int | None, since: int | None, at: int) -> bool:
        """Whether a connection in use from ``since`` that failed at ``at`` was KILLed, or the
        server crashed, in between (it may have died idle, long before a transaction tried it).
        With no connection (a new one that failed to open), whether the server crashed before."""
        lo = -math.inf if since is None else since
        killed = self.conn_killed.get(conn_id, []) if conn_id is not None else []
        return any(lo <= t <= at + KILL_SLACK_MS for t in killed) or any(
            lo <= down <= at for down, _ in self.restarts
        )


def _lost_last_attempt(runs: list[Run], failed_at: int, faults: Faults) -> bool:
    """Whether a fault explains why the last attempt of a message expired: the worker that ran it
    was killed, stopped or cut off by the restart before the DLQ took it; or, when no handler ran
    it, some fault (a connection killed during the fetch included) came after the last run."""
    last = [run for run in runs if run.attempt >= MAX_ATTEMPTS]
    if last:
        return faults.disturbed(last[-1].worker, last[-1].fetched_at, failed_at)
    return faults.any_between(max((run.at_ms for run in runs), default=0), failed_at)


def run_config(query: Any) -> dict[str, Any]:
    """The run's settings: the mode shares and the groups (runs before the effects group did not
    record their groups: fast and strict)."""
    config = {
        name: json.loads(value)
        for name, value in query(f"SELECT name, value FROM `{RESULTS_DB}`.run_config")
    }
    config.setdefault("groups", list(LEGACY_GROUPS))
    return config


def run_groups(query: Any) -> tuple[str, ...]:
    return tuple(run_config(query)["groups"])


def check(query: Any, tally: Tally) -> dict[str, Any]:
    """The checker: lost, rolled back and delivered, dead letters, redeliveries, order,
    duplicates (see the package documentation).

    The sets are read once and compared in Python: cheap for hundreds of thousands of rows,
    where correlated NOT EXISTS over ids without an index would scan quadratically."""
    q, r = QUEUE_DB, RESULTS_DB
    config = run_config(query)
    shares, groups = config["shares"], tuple(config["groups"])
    log_rows = query(
        f"SELECT partition_id, msg_offset, message_id FROM `{q}`.queue_messages WHERE topic = %s",
        (TOPIC,),
    )
    in_log = {msg_id for _, _, msg_id in log_rows}
    mode = {msg_id: mode_of(msg_id, shares) for msg_id in in_log}
    watermarks: dict[str, dict[int, int]] = {g: {} for g in groups}
    for group, pid, acked in query(
        f"SELECT group_name, partition_id, offset_acked FROM `{q}`.queue_offsets"
        f" WHERE group_name IN ({', '.join(['%s'] * len(groups))})",
        groups,
    ):
        watermarks[group][int(pid)] = int(acked)
    dlq_rows = query(
        f"SELECT origin_group, origin_message_id, failures, last_error, failed_at"
        f" FROM `{q}`.queue_messages WHERE origin_topic = %s ORDER BY msg_offset",
        (TOPIC,),
    )
    dlq: dict[str, set[str]] = {g: set() for g in groups}
    for group, msg_id, *_ in dlq_rows:
        dlq.setdefault(group, set()).add(msg_id)
    runs = [
        Run(g, k, int(o), m, int(a), w, int(v), int(t), run_id)
        for g, k, o, m, a, w, v, t, run_id in query(
            "SELECT grp, msg_key, msg_offset, msg_id, attempt, worker, visible_until, at_ms,"
            f" run_id FROM `{r}`.handled ORDER BY id"
        )
    ]
    faults = Faults(
        [
            (kind, detail, int(at))
            for kind, detail, at in query(
                f"SELECT kind, detail, at_ms FROM `{r}`.chaos_events ORDER BY id"
            )
        ]
    )
    stats: collections.Counter[str] = collections.Counter()
    for (text,) in query(f"SELECT stats FROM `{r}`.subscriber_stats"):
        stats.update({k: v for k, v in json.loads(text).items() if isinstance(v, int)})

    by_message: dict[tuple[str, str], list[Run]] = collections.defaultdict(list)
    for run in runs:
        by_message[(run.group, run.msg_id)].append(run)

    # how each effects transaction ended, by run: (outcome, connection id, in use since, at)
    settles: dict[str, tuple[str, int | None, int | None, int]] = {}
    settle_errors: dict[str, str] = {}  # the error text of a failed one
    effect_rows: list[tuple[str, int]] = []
    if EFFECTS_GROUP in groups:
        for run_id, outcome, error, conn_id, since, at in query(
            f"SELECT run_id, outcome, error, conn_id, conn_since, at_ms FROM `{r}`.effects_settled"
        ):
            settle_errors[run_id] = error or ""
            settles[run_id] = (
                outcome,
                None if conn_id is None else int(conn_id),
                None if since is None else int(since),
                int(at),
            )
        effect_rows = [
            (msg_id, int(attempt))
            for msg_id, attempt in query(f"SELECT msg_id, attempt FROM `{q}`.{EFFECTS_TABLE}")
        ]
    settled_as = collections.Counter(outcome for outcome, *_ in settles.values())

    def tx_cut_off(run: Run) -> bool:
        """An effects transaction that failed because its connection was KILLed or the server
        restarted, or that the server aborted (a deadlock, a lock wait timeout, a failed
        certification: the transient errors it may raise under load): its message was nacked
        (or comes back after its visibility)."""
        outcome, conn_id, since, at = settles.get(run.run_id, ("", None, None, 0))
        aborted = outcome == "error" and ABORTED.match(settle_errors.get(run.run_id, ""))
        return outcome in TX_FAILED and (bool(aborted) or faults.cut_off(conn_id, since, at))

    # G5: every committed message done in every group, and handled or dead-lettered there
    lost = 0
    for group in groups:
        for pid, offset, msg_id in log_rows:
            done = watermarks[group].get(int(pid), 0) >= int(offset)
            seen = (group, msg_id) in by_message or msg_id in dlq[group]
            lost += not (done and seen)
    outcomes: dict[str, list[str]] = {"committed": [], "rolled_back": [], "unknown": []}
    for msg_id, outcome in query(f"SELECT msg_id, outcome FROM `{r}`.published"):
        outcomes[outcome].append(msg_id)
    # a publish the publisher saw commit must be in the log
    lost += sum(msg_id not in in_log for msg_id in outcomes["committed"])
    every_handled = {run.msg_id for run in runs}
    rolled_back_seen = sum(
        msg_id in in_log or msg_id in every_handled for msg_id in outcomes["rolled_back"]
    )

    # G10, G14: a DLQ entry only for a message whose handler raised, was given up at its last
    # attempt, or dead-lettered it; with that error; once per group
    counted: collections.Counter[str] = collections.Counter()
    wrongly = 0
    entries: set[tuple[str, str]] = set()
    for group, msg_id, failures, last_error, failed_at in dlq_rows:
        m = mode.get(msg_id, "unknown")
        if (group, msg_id) in entries:
            wrongly += 1  # dead-lettered twice in one group
            continue
        entries.add((group, msg_id))
        if m == "poison" and failures == MAX_ATTEMPTS:
            ok = last_error == poison_last_error(msg_id, MAX_ATTEMPTS)
        elif m == "hang_last" and failures == MAX_ATTEMPTS:
            ok = last_error == given_up_error()
        elif m == "explicit":
            ok = last_error == explicit_reason(msg_id)
        else:
            ok = False
        if ok:
            counted[m] += 1
        elif (
            m in ("poison", "hang_last")
            and failures == MAX_ATTEMPTS
            and last_error == EXPIRED
            and _lost_last_attempt(by_message.get((group, msg_id), []), int(failed_at), faults)
        ):
            # its handler failed on every attempt it ran, and a fault took the last one
            counted["expired"] += 1
        elif (
            group == EFFECTS_GROUP
            and m in ("poison", "hang_last")
            and failures == MAX_ATTEMPTS
            and str(last_error).startswith("ConnectionLost: ")
            and any(
                run.attempt >= MAX_ATTEMPTS and tx_cut_off(run)
                for run in by_message.get((group, msg_id), [])
            )
        ):
            # its last attempt's transaction failed on a connection a KILL or the crash cut off
            # (before its handler could raise): nacked with that error at the last attempt
            counted["tx_lost"] += 1
        else:
            wrongly += 1
    not_dead_lettered = sum(
        msg_id not in dlq[group]
        for msg_id in in_log
        if mode[msg_id] in DEAD_LETTERED
        for group in groups
    )

    # G14: a message held by a live subscriber is not run again: a rerun needs a fault on the
    # worker of the run before it (kill, stall, restart), a nack (poison, hang_last), for a
    # hung run the give-up after MAX_HANDLER_S, or for an effects transaction a fault on its
    # connection; and each run has an attempt of its own
    unexplained = repeated = hung = slow = max_attempt = not_given_up = 0
    duplicates = hang_allowance = 0
    unexplained_runs: list[dict[str, Any]] = []  # the first few, for the report
    for (_, msg_id), message_runs in by_message.items():
        m = mode.get(msg_id, "unknown")
        attempts = [run.attempt for run in message_runs]
        repeated += len(attempts) - len(set(attempts))
        slow += m == "slow" and 1 in attempts
        hung += (m == "hang" and 1 in attempts) + (
            m == "hang_last" and any(a >= MAX_ATTEMPTS for a in attempts)
        )
        if m in ("poison", "hang_last"):
            continue  # every attempt runs and fails: reruns are the point
        if m == "hang" and 1 in attempts:
            hang_allowance += 1
            # the hung run was given up (or its worker died): either way the message runs again
            not_given_up += max(attempts) == 1
        duplicates += len(message_runs) - 1
        if m != "hang":
            max_attempt = max(max_attempt, *attempts)
        for before, after in itertools.pairwise(message_runs):
            if faults.disturbed(before.worker, before.fetched_at, after.at_ms) or tx_cut_off(
                before
            ):
                continue
            given_up = after.at_ms - before.at_ms >= MAX_HANDLER_S * 1000 - GIVE_UP_SLACK_MS
            if m == "hang" and before.attempt == 1 and given_up:
                continue
            unexplained += 1
            if len(unexplained_runs) < 10:
                unexplained_runs.append(
                    {
                        "mode": m,
                        "before": dataclasses.asdict(before),
                        "after": dataclasses.asdict(after),
                        "settled": settles.get(before.run_id),
                        "settle_error": settle_errors.get(before.run_id),
                        "faults_near": faults.near(before.fetched_at, after.at_ms),
                    }
                )

    # exactly-once effects: a normal, slow or hang message committed its row once (with its ack);
    # the others never commit one (their transactions raised, were given up, or dead-lettered
    # without writing); a given-up run's transaction never commits (its ack is stale)
    rows_of = collections.Counter(msg_id for msg_id, _ in effect_rows)
    effects_lost = effects_duplicates = effects_unexpected = 0
    if EFFECTS_GROUP in groups:
        for msg_id in in_log:
            written, rows = mode[msg_id] in WRITTEN, rows_of[msg_id]
            effects_lost += written and rows == 0
            effects_duplicates += written and rows > 1
            effects_unexpected += not written and rows > 0
        effects_unexpected += sum(msg_id not in in_log for msg_id in rows_of)

    def given_up(msg_id: str, attempt: int) -> bool:
        m = mode.get(msg_id)
        return (m == "hang" and attempt == 1) or (m == "hang_last" and attempt >= MAX_ATTEMPTS)

    late_commits = sum(given_up(msg_id, attempt) for msg_id, attempt in effect_rows)
    # given-up runs that left their block on a live connection: each one's ack must be stale
    hung_settled = sum(
        run.group == EFFECTS_GROUP
        and given_up(run.msg_id, run.attempt)
        and settles.get(run.run_id, ("",))[0] in ("stale", "committed")
        for run in runs
    )

    # G6: in the strict group, per partition, handler starts in offset order: no step back, no
    # skip (a redelivery of the same offset is allowed). Retries of nacked messages may follow
    # later offsets (G7): only their first run is checked. A late start by a worker that was frozen
    # meanwhile may have been overtaken by a redelivery: its step back is excused (reported as
    # late). A skip is never excused, and every start, late or not, moves the partition on: a late
    # start in order is followed by the next offset.
    violations = late = 0
    top: dict[str, int] = {}
    started: set[tuple[str, int]] = set()
    for run in runs:
        if run.group != "strict":
            continue
        first = (run.key, run.offset) not in started
        started.add((run.key, run.offset))
        if not first and mode.get(run.msg_id) in NACKED:
            continue
        last = top.get(run.key, 0)
        top[run.key] = max(last, run.offset)
        if last <= run.offset <= last + 1:
            continue
        if (
            run.offset < last
            and run.late
            and any(
                run.at_ms <= window[1] + FROZEN_GRACE_MS
                for window in faults.frozen(run.worker, run.fetched_at, run.at_ms)
            )
        ):
            late += 1
        else:
            violations += 1
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
        # each effects transaction that failed on the database reruns its message at most once
        "duplicate_bound": tally.in_flight_bound
        + hang_allowance
        + sum(settled_as[outcome] for outcome in TX_FAILED),
        "unexplained_redeliveries": unexplained,
        "unexplained_runs": unexplained_runs,
        "not_given_up": not_given_up,
        "repeated_attempts": repeated,
        "max_attempt": max_attempt,
        "slow": slow,
        "hung": hung,
        "given_up": stats["given_up"],
        "late_outcomes": stats["late_outcomes"],
        "poison": counted["poison"],
        "timed_out": counted["hang_last"],
        "explicit": counted["explicit"],
        "dlq_expired": counted["expired"],
        "dlq_tx_lost": counted["tx_lost"],
        "wrongly_dead_lettered": wrongly,
        "not_dead_lettered": not_dead_lettered,
        "dlq": len(dlq_rows),
        "handled": len(runs),
        "crashes": tally.crashes,
        "effects_rows": len(effect_rows),
        "effects_duplicates": effects_duplicates,
        "effects_lost": effects_lost,
        "effects_unexpected": effects_unexpected,
        "effects_late_commits": late_commits,
        "stale_rolled_back": settled_as["stale"],
        "hung_settled": hung_settled,
        "tx_conn_lost": settled_as["lost_connection"],
        "tx_errors": settled_as["error"],
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
        f" (bound {s['duplicate_bound']}) unexplained_redeliveries={s['unexplained_redeliveries']}"
        f" not_given_up={s['not_given_up']} repeated_attempts={s['repeated_attempts']}"
        f" max_attempt={s['max_attempt']}"
        f" slow={s['slow']} hung={s['hung']} given_up={s['given_up']}"
        f" late_outcomes={s['late_outcomes']} poison={s['poison']} timed_out={s['timed_out']}"
        f" explicit={s['explicit']} dlq_expired={s['dlq_expired']} dlq_tx_lost={s['dlq_tx_lost']}"
        f" wrongly_dead_lettered={s['wrongly_dead_lettered']}"
        f" not_dead_lettered={s['not_dead_lettered']} effects_rows={s['effects_rows']}"
        f" effects_duplicates={s['effects_duplicates']} effects_lost={s['effects_lost']}"
        f" effects_unexpected={s['effects_unexpected']}"
        f" effects_late_commits={s['effects_late_commits']}"
        f" stale_rolled_back={s['stale_rolled_back']} (hung {s['hung_settled']})"
        f" tx_conn_lost={s['tx_conn_lost']}"
        f" tx_errors={s['tx_errors']} rolled_back={s['rolled_back']}"
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
        and s["unexplained_redeliveries"] == 0
        and s["not_given_up"] == 0
        and s["repeated_attempts"] == 0
        and s["wrongly_dead_lettered"] == 0
        and s["not_dead_lettered"] == 0
        and s["effects_duplicates"] == 0
        and s["effects_lost"] == 0
        and s["effects_unexpected"] == 0
        and s["effects_late_commits"] == 0
        and s["restarts"] >= 1
        and s["crashes"] == 0
    )
