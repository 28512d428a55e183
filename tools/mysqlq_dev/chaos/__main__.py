"""python -m mysqlq_dev.chaos: run the harness and the checker, re-check a run, or be a worker."""

from __future__ import annotations

import argparse
import logging
import sys

from mysqlq_dev.chaos import CONFIGS, GROUPS
from mysqlq_dev.chaos.controller import run_check, run_controller
from mysqlq_dev.chaos.workers import run_publisher, run_subscriber


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mysqlq_dev.chaos", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the harness and the checker")
    run.add_argument("--config", choices=sorted(CONFIGS), default="ci")
    run.add_argument(
        "--workdir", help="logs, server data, summary.json (default: a new temporary directory)"
    )
    run.add_argument("--buffer-pool", default="256M")
    for name in ("duration", "messages", "partitions", "subscribers", "kill-every", "seed"):
        run.add_argument(f"--{name}", type=float)
    recheck = sub.add_parser("check", help="run the checker again on a run's kept server data")
    recheck.add_argument("--workdir", required=True)
    for kind in ("subscriber", "publisher"):
        w = sub.add_parser(kind)
        w.add_argument("--dsn", required=True)
        w.add_argument("--results-dsn", required=True)
        w.add_argument("--name", required=True)
        w.add_argument("--group", choices=sorted(GROUPS))
        w.add_argument("--messages", type=int, default=1000)
        w.add_argument("--duration", type=float, default=60.0)
        w.add_argument("--partitions", type=int, default=16)
        w.add_argument("--seed", type=int, default=1)
        w.add_argument("--rollback-share", type=float, default=0.1)
        w.add_argument("--hold-share", type=float, default=0.3)
        w.add_argument("--shares", default="{}", help="the message modes' shares (JSON)")
    args = p.parse_args(argv)
    if args.command == "run":
        return run_controller(args)
    if args.command == "check":
        return run_check(args)
    logging.basicConfig(level=logging.WARNING, format=f"%(asctime)s {args.name} %(message)s")
    return run_subscriber(args) if args.command == "subscriber" else run_publisher(args)


if __name__ == "__main__":
    sys.exit(main())
