"""The subscriber's handler threads: a fixed number of workers that a hung handler cannot shrink.

A task runs on one of ``size`` threads. When the subscriber gives up on a handler (it ran past
``max_handler_time``), :meth:`HandlerPool.replace` retires the thread running it and starts a new
one, so the pool keeps ``size`` threads that can work. Python cannot stop a thread: the retired
one finishes its handler whenever it returns (the subscriber fences its outcome) and then exits.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["HandlerPool"]

log = logging.getLogger("mysqlq.subscriber")


class HandlerPool:
    def __init__(self, size: int, name: str = "mysqlq-handler") -> None:
        self._name = name
        self._tasks: queue.SimpleQueue[tuple[Callable[..., Any], tuple] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._workers: set[threading.Thread] = set()
        self._retired: set[threading.Thread] = set()
        self._spawned = 0
        self._closed = False
        for _ in range(size):
            self._spawn()

    @property
    def size(self) -> int:
        """Threads that take tasks (retired ones not counted)."""
        with self._lock:
            return len(self._workers)

    @property
    def retired(self) -> int:
        """Retired threads still stuck in a handler."""
        with self._lock:
            return sum(1 for t in self._retired if t.is_alive())

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self._tasks.put((fn, args))

    def replace(self, thread: threading.Thread | None) -> None:
        """Retire ``thread`` (it exits once its task returns) and start a new worker."""
        with self._lock:
            if thread is None or thread not in self._workers or self._closed:
                return
            self._workers.discard(thread)
            self._retired.add(thread)
        self._spawn()

    def shutdown(self) -> None:
        """No more tasks: idle workers exit; busy ones exit after their task."""
        with self._lock:
            self._closed = True
            n = len(self._workers)
        for _ in range(n):
            self._tasks.put(None)

    def _spawn(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._spawned += 1
            t = threading.Thread(
                target=self._work, name=f"{self._name}-{self._spawned}", daemon=True
            )
            self._workers.add(t)
        t.start()

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            item = self._tasks.get()
            if item is None:
                break
            fn, args = item
            try:
                fn(*args)
            except BaseException:  # a task must not take its thread down
                log.exception("handler task failed")
            with self._lock:
                if me in self._retired:
                    self._retired.discard(me)
                    return
        with self._lock:
            self._workers.discard(me)
