"""Chaos harness: real publishers and subscribers under kills, stalls and a server restart.

``scripts/chaos`` (``python -m mysqlq.tools.chaos run``) starts a throwaway server it controls
(:mod:`mysqlq.tools.localserver`), migrates a ``chaos`` database, and runs as separate processes:

* **publishers** that publish in transactions over many partitions, some held open for a while
  before committing, some rolled back (every outcome is recorded in a results database);
* **subscribers** (``mysqlq.Subscriber``) in two groups: ``fast`` (``batch_size`` 10, 4 handler
  threads) and ``strict`` (``batch_size = 1``). Each handler records ``(group, message, attempt,
  delivery deadline, server time)`` in the results database over its own connection, then
  returns (ack).

While they run, the controller ``kill -9``\\ s a random subscriber every few seconds and starts a
new one, ``SIGSTOP``\\ s one past its lease and visibility and then ``SIGCONT``\\ s it, restarts
(crashes) the database server once, and ``KILL``\\ s the driver's connections from the server side.
Then publishing stops, the groups drain, the subscribers stop, and the checker proves:

* **lost = 0**: every committed message (in the log, which has no GC here) was handled by every
  group and is acked (below the group's watermark) or sits in the group's DLQ; every publish the
  publisher saw commit is in the log (G2, G5);
* **rolled back delivered = 0**: no message of a rolled-back transaction is in the log or handled;
* **order violations = 0** in the strict group: per partition, handler starts follow the offsets
  without going back or skipping (G6). A handler start after its delivery's visibility deadline
  (a process stopped between fetch and handler) is outside G6 and reported as ``late``;
* **duplicates** (extra handler runs) are at most what was in flight at each kill, stall, server
  restart (partitions held x batch size, read from the lease table at that moment).

It prints one summary line and exits 0 when every check holds. ``--config ci`` is the short run
(well under 3 minutes); ``--config long`` is the one for the report.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("mysqlq.tools.chaos")

TOPIC = "chaos"
QUEUE_DB = "chaos"
RESULTS_DB = "chaos_results"
GROUPS = {"fast": 10, "strict": 1}  # group -> batch_size
LEASE_S = 3.0
VISIBILITY_S = 5.0
MAX_ATTEMPTS = 100

RESULTS_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS handled (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        grp VARCHAR(64) NOT NULL,
        msg_key VARCHAR(191) NOT NULL,
        msg_offset BIGINT NOT NULL,
        msg_id VARCHAR(191) NOT NULL,
        attempt INT NOT NULL,
        worker VARCHAR(100) NOT NULL,
        visible_until BIGINT NOT NULL,
        at_ms BIGINT NOT NULL,
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
    ),
}


def _connect(dsn: str) -> Any:
    from mysqlq.connection import connect

    return connect(dsn)
