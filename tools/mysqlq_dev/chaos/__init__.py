"""Chaos harness: real publishers and subscribers under kills, stalls and a server restart.

``scripts/chaos`` (``python -m mysqlq_dev.chaos run``) starts a throwaway server it controls
(:mod:`mysqlq_dev.localserver`), migrates a ``chaos`` database, and runs as separate processes:

* **publishers** that publish in transactions over many partitions, some held open for a while
  before committing, some rolled back (every outcome is recorded in a results database);
* **subscribers** (``mysqlq.Subscriber``) in three groups: ``fast`` (``batch_size`` 10, 4 handler
  threads), ``strict`` (``batch_size = 1``) and ``effects`` (``batch_size`` 10, 4 threads), with
  ``max_attempts`` :data:`MAX_ATTEMPTS` and ``max_handler_time`` :data:`MAX_HANDLER_S`. Each
  handler records ``(group, message, attempt, worker, delivery deadline, server time)`` in the
  results database over its own connection, then does what the message's **mode** says. The
  ``effects`` group's handler does it inside ``msg.transaction()`` (exactly-once effects): it
  inserts one row per message into :data:`EFFECTS_TABLE`, in the queue's own database, then acts
  out the mode, and leaving the block acks the message in that transaction; it records how the
  transaction ended (committed, stale, raised, lost connection) in ``effects_settled``.

A message's mode follows from its id alone (:func:`mode_of`: a hash of the id against the
``Config`` shares), so workers and checker agree on it with no bookkeeping:

* ``normal`` (almost all): return, so the message is acked;
* ``slow``: attempt 1 sleeps :data:`SLOW_S` (1.5 x the visibility timeout) in small sleeps, then
  returns. The subscriber's keepalive keeps it, and the messages fetched behind it, invisible
  (G14): it must not be redelivered unless a fault hit its worker;
* ``hang``: attempt 1 does not return for :data:`HANG_S`; the subscriber gives it up at
  :data:`MAX_HANDLER_S` (a failed attempt, "handler exceeded max_handler_time"), its partition
  goes on, attempt 2 returns (ack); the hung handler's late return is dropped (``late_outcomes``);
* ``poison``: raises on every attempt: nacked with backoff, dead-lettered at :data:`MAX_ATTEMPTS`
  with the raised error as ``last_error`` (:func:`poison_error`);
* ``hang_last``: raises like ``poison`` but hangs on its last attempt: dead-lettered by the
  give-up, ``last_error`` "handler exceeded max_handler_time";
* ``explicit``: the handler calls ``msg.dead_letter(...)`` (:func:`explicit_reason`).

In the ``effects`` group the row is written first (except for ``explicit``, which dead-letters in
the transaction, ``msg.dead_letter(reason, conn=tx.connection)``, and writes nothing), so a
``poison`` run's row is rolled back with its exception, and a hung run's (``hang`` at attempt 1,
``hang_last`` at its last) when it finally leaves the block: its delivery was given up and
redelivered or dead-lettered meanwhile, its ack is stale (``mysqlq.StaleDelivery``), and its
transaction rolls back (``stale_rolled_back``).

While they run, the controller ``kill -9``\\ s a random subscriber every few seconds and starts a
new one, ``SIGSTOP``\\ s one past its lease and visibility and then ``SIGCONT``\\ s it, restarts
(crashes) the database server once, and ``KILL``\\ s the driver's connections from the server side
(each fault is recorded in ``chaos_events``, with the stall's and the restart's end). Then
publishing stops, the groups drain, the subscribers stop, and the checker proves:

* **lost = 0**: every committed message (in the log, which has no GC here) was handled by every
  group and is acked (below the group's watermark) or sits in the group's DLQ; every publish the
  publisher saw commit is in the log (G2, G5);
* **rolled back delivered = 0**: no message of a rolled-back transaction is in the log or handled;
* **wrongly dead-lettered = 0**: a DLQ entry only for a ``poison``, ``hang_last`` or ``explicit``
  message, once per group, with the error its handler raised, the give-up's reason or the
  explicit reason (G10, G14); ``visibility timeout expired`` is accepted only for a ``poison`` or
  ``hang_last`` message whose last attempt was lost to a fault (counted as ``dlq_expired``), and
  in the ``effects`` group a connection error only for one whose last transaction lost a KILLed
  connection or the crashed server (``dlq_tx_lost``).
  A normal, slow or hang-once message in a DLQ is a violation; so is a ``poison``, ``hang_last``
  or ``explicit`` message missing from a group's DLQ (``not_dead_lettered``);
* **unexplained redeliveries = 0**: a message a live subscriber holds is not run again (G14).
  A run after the first of a message in a group needs a reason: the worker of the run before it
  was killed or stopped, or the server restarted, in between; or the message is ``poison`` or
  ``hang_last`` (nacked every time); or it is a ``hang`` message's retry, at least
  :data:`MAX_HANDLER_S` after its hung run. So a ``slow`` message runs once unless a fault hit its
  worker. A hung run is always followed by a retry (given up, or its worker died:
  **not given up = 0**); **repeated attempts = 0**: no two handler runs of a message in a group
  have the same attempt number (an attempt is given back only for a message never started);
* **order violations = 0** in the strict group: per partition, handler starts follow the offsets
  without going back or skipping (G6). Retries of the nacked modes (``poison``, ``hang``,
  ``hang_last``) are not checked: a nack does not hold the partition back (G7). A start recorded
  after its delivery's fetch-time deadline by a worker that was frozen meanwhile (the stalled
  one, or every worker across the server restart) may have been overtaken by a redelivery: its
  step back is outside G6 and reported as ``late``. A skip is never excused, and every start,
  late or not, moves its partition on (a message kept alive behind a slow handler starts after
  its fetch-time deadline, in order);
* **duplicates** (extra handler runs of ``normal``, ``slow``, ``hang`` and ``explicit``
  messages) are at most what was in flight at each kill, stall, server restart (partitions held
  x batch size, read from the lease table at that moment), plus one per ``hang`` message and
  group that hung, plus one per ``effects`` transaction that lost its connection;
* **exactly-once effects** in the ``effects`` group, once drained: every ``normal``, ``slow`` and
  ``hang`` message has exactly one row in :data:`EFFECTS_TABLE` (none: ``effects_lost``; more
  than one: ``effects_duplicates``), and ``poison``, ``hang_last`` and ``explicit`` messages, and
  ids not in the log, have none (``effects_unexpected``); a given-up run (``hang`` at attempt 1,
  ``hang_last`` at its last) never commits (``effects_late_commits``). A rerun after a
  transaction that lost its connection is explained when that connection was KILLed while in
  use, or the server crashed meanwhile; one after a transaction the server aborted (deadlock,
  lock wait timeout, failed certification) is explained as it is (its message was nacked).

It prints one summary line and exits 0 when every check holds. ``--config ci`` is the short run
(well under 3 minutes); ``--config long`` is the one for the report.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("mysqlq_dev.chaos")

TOPIC = "chaos"
QUEUE_DB = "chaos"
RESULTS_DB = "chaos_results"
GROUPS = {"fast": 10, "strict": 1, "effects": 10}  # group -> batch_size
# the group whose handler writes in msg.transaction(); before it, runs had only fast and strict
EFFECTS_GROUP = "effects"
LEGACY_GROUPS = ("fast", "strict")
EFFECTS_TABLE = "chaos_effects"  # in the queue's database: the handler's writes
LEASE_S = 3.0
VISIBILITY_S = 5.0
# A poison message reaches the DLQ after this many handler runs (about 2 s of backoff: 0.05 s
# doubling up to 0.5 s). A fault charges an attempt only to a delivery its victim held unsettled
# (G14: a fetch charges one, a release of an unstarted message gives it back), and a message is
# held for milliseconds unless it waits behind a slow handler, so a message that is never nacked
# is charged once per fault that catches it held: the highest attempt such a message ran at
# (``max_attempt`` in the summary) was 2 in the ci runs and 3 in a long run (a message held by
# two subscribers killed one after the other). Exhausting 8 would take seven faults in a row,
# each catching it again before a handler finished it.
MAX_ATTEMPTS = 8
# give up on a handler after this long; above SLOW_S, so a slow handler is never given up
MAX_HANDLER_S = 10.0
SLOW_S = 1.5 * VISIBILITY_S  # a slow handler's first attempt: longer than its visibility timeout
# a hung handler returns after this long, when its message was retried already: what it settles
# then is dropped (the subscriber's late_outcomes)
HANG_S = MAX_HANDLER_S + VISIBILITY_S
MODES = ("normal", "slow", "hang", "poison", "hang_last", "explicit")
EXPIRED = "visibility timeout expired"  # the last_error of a delivery that expired at the last try

RESULTS_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS handled (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        run_id CHAR(32) NOT NULL,
        grp VARCHAR(64) NOT NULL,
        msg_key VARCHAR(191) NOT NULL,
        msg_offset BIGINT NOT NULL,
        msg_id VARCHAR(191) NOT NULL,
        attempt INT NOT NULL,
        worker VARCHAR(100) NOT NULL,
        visible_until BIGINT NOT NULL,
        at_ms BIGINT NOT NULL,
        UNIQUE KEY handled_run (run_id),
        KEY handled_by_message (grp, msg_id)
    )""",
    """CREATE TABLE IF NOT EXISTS published (
        msg_id VARCHAR(191) PRIMARY KEY,
        outcome VARCHAR(16) NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS chaos_events (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        kind VARCHAR(32) NOT NULL,
        detail VARCHAR(255) NOT NULL,
        in_flight INT NOT NULL,
        at_ms BIGINT NOT NULL
    )""",
    # each subscriber's Subscriber.stats(), rewritten every second and at exit
    """CREATE TABLE IF NOT EXISTS subscriber_stats (
        worker VARCHAR(100) PRIMARY KEY,
        grp VARCHAR(64) NOT NULL,
        stats TEXT NOT NULL,
        at_ms BIGINT NOT NULL
    )""",
    # the run's settings (the mode shares, the groups), for the checker
    """CREATE TABLE IF NOT EXISTS run_config (
        name VARCHAR(64) PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    # how each transaction of the effects group ended (outcome: committed, stale, raised,
    # lost_connection, error), and on which connection: its server id (to match a KILL) and the
    # server time of its first transaction (ids start again after a restart)
    """CREATE TABLE IF NOT EXISTS effects_settled (
        run_id CHAR(32) PRIMARY KEY,
        msg_id VARCHAR(191) NOT NULL,
        attempt INT NOT NULL,
        worker VARCHAR(100) NOT NULL,
        outcome VARCHAR(16) NOT NULL,
        error VARCHAR(255) NULL,
        conn_id BIGINT NULL,
        conn_since BIGINT NULL,
        at_ms BIGINT NOT NULL
    )""",
]
# the effects group's writes, in the queue's own database (so they can share the ack's
# transaction). No unique key on msg_id: a second commit of a message's writes must be possible,
# so that the checker sees it.
QUEUE_SCHEMA = [
    f"""CREATE TABLE IF NOT EXISTS {EFFECTS_TABLE} (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        msg_id VARCHAR(191) NOT NULL,
        msg_key VARCHAR(191) NOT NULL,
        msg_offset BIGINT NOT NULL,
        attempt INT NOT NULL,
        worker VARCHAR(100) NOT NULL,
        run_id CHAR(32) NOT NULL,
        at_ms BIGINT NOT NULL
    )""",
]
SERVER_NOW = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"


@dataclass
class Config:
    duration: float = 60.0  # seconds of publishing and chaos
    messages: int = 6_000  # published in that time (committed or not)
    partitions: int = 24
    publishers: int = 2
    subscribers: int = 3  # per group
    kill_every: float = 4.0
    conn_kill_every: float = 5.0
    stop_at: float = 0.2  # fraction of the duration
    restart_at: float = 0.5
    rollback_share: float = 0.1
    hold_share: float = 0.3  # transactions held open 50-300 ms before committing
    drain_timeout: float = 120.0
    seed: int = 1
    # shares of the message modes (see the module documentation); the rest are normal
    slow_share: float = 0.002
    hang_share: float = 0.001
    poison_share: float = 0.001
    hang_last_share: float = 0.0005
    explicit_share: float = 0.0015

    def shares(self) -> dict[str, float]:
        return {mode: getattr(self, f"{mode}_share") for mode in MODES if mode != "normal"}


CONFIGS = {
    "ci": Config(),
    # >= 100,000 committed messages (about 10% are rolled back), >= 50 kills
    "long": Config(
        duration=720.0,
        messages=120_000,
        partitions=200,
        publishers=4,
        subscribers=3,
        kill_every=9.0,
        conn_kill_every=10.0,
        drain_timeout=600.0,
        # 20 times the messages, not 20 times the handler threads: a tenth of the ci shares
        slow_share=0.0002,
        hang_share=0.0001,
        poison_share=0.0001,
        hang_last_share=0.00005,
        explicit_share=0.00015,
    ),
}


def mode_of(msg_id: str, shares: dict[str, float]) -> str:
    """The mode of a message, from a hash of its id: the same in every process and run."""
    digest = hashlib.sha256(msg_id.encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    for mode in MODES[1:]:
        point -= shares.get(mode, 0.0)
        if point < 0:
            return mode
    return "normal"


def poison_error(msg_id: str, attempt: int) -> str:
    """What a poison handler raises (the subscriber stores ``Type: text`` as the nack's error)."""
    return f"chaos poison {msg_id} at attempt {attempt}"


def poison_last_error(msg_id: str, attempt: int) -> str:
    return f"RuntimeError: {poison_error(msg_id, attempt)}"


def explicit_reason(msg_id: str) -> str:
    return f"chaos explicit dead letter {msg_id}"


def given_up_error() -> str:
    return f"handler exceeded max_handler_time ({MAX_HANDLER_S:g}s)"


def _connect(dsn: str) -> Any:
    from mysqlq.connection import connect

    return connect(dsn)
