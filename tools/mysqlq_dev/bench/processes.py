"""Client processes for the benchmark: forked, connected first, then started together."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue as queue_module
import time
from collections.abc import Callable
from typing import Any

# (fork: the workloads' functions and their arguments need not be picklable)
CONTEXT = mp.get_context("fork")


class WorkloadError(RuntimeError):
    """A benchmark process failed or a workload did not finish in time."""


def _client_main(target: Callable, index: int, barrier: Any, results: Any, args: tuple) -> None:
    try:
        state = target("connect", index, *args)
        barrier.wait(timeout=60)
        t0 = time.perf_counter()
        target("run", index, *args, state=state)
        results.put((index, time.perf_counter() - t0, None))
    except BaseException as exc:
        with contextlib.suppress(Exception):
            barrier.abort()
        results.put((index, 0.0, repr(exc)))


def run_clients(target: Callable, clients: int, *args: Any, timeout: float = 900) -> float:
    """Run ``target`` in ``clients`` processes that start together; wall seconds until all end."""
    barrier = CONTEXT.Barrier(clients + 1)
    results = CONTEXT.Queue()
    procs = [
        CONTEXT.Process(target=_client_main, args=(target, i, barrier, results, args), daemon=True)
        for i in range(clients)
    ]
    for p in procs:
        p.start()
    # a client that failed to connect breaks the barrier: its error is reported below
    with contextlib.suppress(Exception):
        barrier.wait(timeout=60)
    t0 = time.perf_counter()
    errors = []
    for _ in procs:
        try:
            _index, _seconds, error = results.get(timeout=timeout)
        except queue_module.Empty:
            errors.append("timed out")
            break
        if error:
            errors.append(error)
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    if errors:
        raise WorkloadError(f"{target.__name__}: {errors[0]}")
    return elapsed


def share(total: int, clients: int, index: int) -> int:
    return total // clients + (1 if index < total % clients else 0)
