"""The demo's options and its subscriber processes: each process is
``python -m mysqlq_dev.demo_workers`` and writes a summary (handled, redelivered,
publish-to-handler latencies) when SIGTERM stops it."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mysqlq
from mysqlq.errors import Error

GROUP = "demo"
STOP_TIMEOUT = 30.0


class DemoError(Error):
    """The demo could not run to the end."""


@dataclass
class DemoOptions:
    messages: int = 20_000
    partitions: int = 16
    subscribers: int = 4
    batch_size: int = 10
    concurrency: int = 4
    rate: float | None = None  # messages per second; None: as fast as possible
    lease_duration: float = 6.0
    visibility_timeout: float = 30.0
    timeout: float = 600.0


class Workers:
    """The subscriber processes, each ``python -m mysqlq_dev.demo_workers ...``."""

    def __init__(self, dsn: str, topic: str, options: DemoOptions, directory: Path) -> None:
        self.dsn = dsn
        self.topic = topic
        self.options = options
        self.directory = directory
        self.procs: list[subprocess.Popen[bytes]] = []
        self.names: list[str] = []

    def summary_path(self, i: int) -> Path:
        return self.directory / f"worker-{i}.json"

    def log_path(self, i: int) -> Path:
        return self.directory / f"worker-{i}.log"

    def start(self) -> None:
        # the DSN goes through the environment, not the command line (ps shows that)
        env = {**os.environ, "MYSQLQ_DSN": self.dsn}
        o = self.options
        for i in range(o.subscribers):
            name = f"demo-w{i}"
            cmd = [
                sys.executable,
                "-m",
                "mysqlq_dev.demo_workers",
                "--topic",
                self.topic,
                "--group",
                GROUP,
                "--name",
                name,
                "--batch-size",
                str(o.batch_size),
                "--concurrency",
                str(o.concurrency),
                "--lease-duration",
                str(o.lease_duration),
                "--visibility-timeout",
                str(o.visibility_timeout),
                "--out",
                str(self.summary_path(i)),
            ]
            with open(self.log_path(i), "wb") as log:
                self.procs.append(
                    subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
                )
            self.names.append(name)

    def log_tail(self, i: int, chars: int = 1500) -> str:
        try:
            return self.log_path(i).read_text(errors="replace")[-chars:].strip()
        except OSError:
            return ""

    def check_alive(self) -> None:
        for i, proc in enumerate(self.procs):
            code = proc.poll()
            if code is not None:
                raise DemoError(
                    f"subscriber process {self.names[i]} exited with status {code}: "
                    f"{self.log_tail(i) or '(no output)'}"
                )

    def stop(self) -> None:
        """SIGTERM (a graceful stop), then wait; SIGKILL what is left after STOP_TIMEOUT."""
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def summaries(self) -> list[dict[str, Any]]:
        out = []
        for i, name in enumerate(self.names):
            try:
                summary = json.loads(self.summary_path(i).read_text())
            except (OSError, ValueError):
                summary = {"name": name, "missing": True, "log": self.log_tail(i)}
            summary["exit_status"] = self.procs[i].returncode
            out.append(summary)
        return out


def worker_main(argv: list[str]) -> int:
    """One subscriber process of the demo: consume until SIGTERM, then write the summary."""
    import logging

    parser = argparse.ArgumentParser(prog="python -m mysqlq_dev.demo_workers")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", default=GROUP)
    parser.add_argument("--name", required=True)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--lease-duration", type=float, default=6.0)
    parser.add_argument("--visibility-timeout", type=float, default=30.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    lock = threading.Lock()
    latencies: list[float] = []
    ids: list[str] = []
    redelivered = 0
    warmup = 0

    def handle(msg: mysqlq.Message) -> None:
        nonlocal redelivered, warmup
        now = time.time()
        metadata = msg.metadata or {}
        sent = metadata.get("published_at")
        with lock:
            if metadata.get("warmup"):
                warmup += 1
                return
            if isinstance(sent, (int, float)):
                latencies.append(now - sent)
            ids.append(msg.id)
            if msg.attempt > 1:
                redelivered += 1

    sub = mysqlq.Subscriber(
        topic=args.topic,
        group=args.group,
        handler=handle,
        name=args.name,
        batch_size=args.batch_size,
        concurrency=args.concurrency,
        lease_duration=args.lease_duration,
        visibility_timeout=args.visibility_timeout,
        poll_interval=0.05,
    )
    parent = os.getppid()

    def watch_parent() -> None:  # an orphaned worker stops itself
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    sub.run()  # until SIGTERM
    with lock:
        summary = {
            "name": args.name,
            "handled": len(ids),
            "redelivered": redelivered,
            "warmup": warmup,
            "latencies": latencies,
            "ids": ids,
            "subscriber": sub.stats(),
        }
    out = Path(args.out)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary))
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
