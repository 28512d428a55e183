"""A Celery app on mysqlq for test_workers.py, run only in subprocesses with this folder on
``PYTHONPATH`` (see __init__.py): ``celery -A worker_app worker ...`` and ``python
worker_app.py produce N``.

Environment: ``MYSQLQ_CELERY_DSN`` (the test database, mysql://...). Every task run inserts a
row into ``celery_runs`` of that database, in its own autocommitted statement, so the test reads
what ran where and when (``at_ms``: the worker's clock; the producer's ``due_ms`` is on the same
machine's clock).
"""

from __future__ import annotations

import os
import sys
import time

import mysqlq.celery  # noqa: F401  (registers the mysqlq:// transport)
from celery import Celery
from mysqlq import connection

DSN = os.environ["MYSQLQ_CELERY_DSN"]
QUEUE = "work"

RUNS = """
CREATE TABLE IF NOT EXISTS celery_runs (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind VARCHAR(16) NOT NULL,
    n INT NOT NULL,
    task_id VARCHAR(64) NOT NULL,
    retries INT NOT NULL,
    worker VARCHAR(191) NOT NULL,
    pid INT NOT NULL,
    redelivered TINYINT NOT NULL,
    due_ms BIGINT NULL,
    at_ms BIGINT NOT NULL,
    KEY (kind, n)
)
"""

app = Celery("mysqlq_celery_test", broker="mysqlq://" + DSN.split("://", 1)[1])
app.conf.update(
    task_default_queue=QUEUE,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    task_ignore_result=True,
    worker_prefetch_multiplier=4,
    # a killed pool process's task is requeued after 1 s (Celery waits 10 s by default)
    worker_lost_wait=1,
    broker_connection_retry_on_startup=True,
    broker_transport_options={
        # a killed worker's messages come back after 4 s, its partitions move after 3 s
        "visibility_timeout": 4,
        "lease_duration": 3,
        "polling_interval": 0.5,
    },
)

_conn: dict[int, object] = {}


def record(task, kind: str, n: int, due_ms: int | None = None) -> None:
    pid = os.getpid()
    conn = _conn.get(pid)
    if conn is None:
        conn = _conn[pid] = connection.connect(DSN)
    req = task.request
    cur = conn.cursor()
    cur.execute(
        "INSERT INTO celery_runs (kind, n, task_id, retries, worker, pid, redelivered, due_ms,"
        " at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            kind,
            n,
            req.id,
            req.retries,
            req.hostname or "",
            pid,
            int(bool((req.delivery_info or {}).get("redelivered"))),
            due_ms,
            int(time.time() * 1000),
        ),
    )
    cur.close()


@app.task(bind=True, name="worker_app.plain")
def plain(self, n: int, pause: float = 0.0) -> None:
    if pause:
        time.sleep(pause)
    record(self, "plain", n)


@app.task(bind=True, name="worker_app.later")
def later(self, n: int, due_ms: int) -> None:
    record(self, "eta", n, due_ms)


@app.task(bind=True, name="worker_app.flaky", max_retries=3)
def flaky(self, n: int) -> None:
    """Fails its first run, and asks to be retried one second later."""
    if self.request.retries == 0:
        record(self, "flaky-fail", n)
        raise self.retry(countdown=1)
    record(self, "flaky", n)


def produce(total: int, eta_every: int, flaky_every: int, slow_every: int) -> None:
    """Publish ``total`` tasks: every ``eta_every``-th with a 2 s countdown, every
    ``flaky_every``-th one that retries once, every ``slow_every``-th sleeping 0.2 s."""
    with app.producer_or_acquire() as producer:
        for n in range(total):
            if n % eta_every == 0:
                due = time.time() + 2.0
                later.apply_async((n, int(due * 1000)), countdown=2, producer=producer)
            elif n % flaky_every == 0:
                flaky.apply_async((n,), producer=producer)
            else:
                pause = 0.2 if n % slow_every == 0 else 0.0
                plain.apply_async((n, pause), producer=producer)
    print("PRODUCED", total, flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["produce"]:
    total, eta_every, flaky_every, slow_every = (int(a) for a in sys.argv[2:6])
    produce(total, eta_every, flaky_every, slow_every)
