"""Serving the dashboard with uvicorn: in the foreground (``mysqlq dashboard``), or in a thread of
your process (``Running``: tests, or a service that embeds it).

The listening socket is bound here, before uvicorn starts, so that port 0 (any free port) works
and the URL printed is the real one. uvicorn believes ``X-Forwarded-For`` and
``X-Forwarded-Proto`` only from ``forwarded_allow_ips`` (default 127.0.0.1: a proxy on the same
machine).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from typing import Any

import uvicorn

from mysqlq.dashboard.app import create_app
from mysqlq.dashboard.reader import Pool, Reader
from mysqlq.dashboard.settings import Settings

__all__ = ["Running", "bind", "check_database", "serve", "url_of"]


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)  # connections wait in the backlog until uvicorn accepts them
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(settings: Settings, sock: socket.socket) -> str:
    port = sock.getsockname()[1]
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"http://{host}:{port}{settings.root_path}/"


def check_database(settings: Settings) -> str:
    """Connect once and check the protocol version (mysqlq errors when that fails)."""
    pool = Pool(settings.dsn, size=1)
    try:
        return Reader(pool).check_version()
    finally:
        pool.close()


def _server(settings: Settings, log_config: Any) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(settings),
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        access_log=settings.access_log,
        server_header=False,
        lifespan="on",
        log_config=log_config,
        timeout_graceful_shutdown=5,
    )
    return uvicorn.Server(config)


def serve(settings: Settings, announce: Any = print) -> None:
    """Check the database, bind, announce the URL and serve until SIGINT or SIGTERM, then
    return (uvicorn shuts down gracefully and passes the signal on to the handlers it found:
    these only note it, so the command ends with status 0 rather than dying of the signal)."""
    settings.check()
    check_database(settings)
    sock = bind(settings.host, settings.port)
    server = _server(settings, uvicorn.config.LOGGING_CONFIG)
    received: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, frame: received.append(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        announce(url_of(settings, sock))
        with contextlib.closing(sock):
            server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Running:
    """The dashboard served from a thread of this process while the ``with`` block runs::

    with Running(Settings(dsn, port=0)) as dash:
        urllib.request.urlopen(dash.url)
    """

    def __init__(self, settings: Settings, start_timeout: float = 20.0) -> None:
        self.settings = settings.check()
        self.start_timeout = start_timeout
        self.url = ""
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def app(self) -> Any:
        assert self._server is not None
        return self._server.config.app

    def __enter__(self) -> Running:
        self._sock = bind(self.settings.host, self.settings.port)
        self.port = self._sock.getsockname()[1]
        self.url = url_of(self.settings, self._sock)
        self._server = _server(self.settings, None)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name="mysqlq-dashboard"
        )
        self._thread.daemon = True
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError("the dashboard did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15)
        if self._sock is not None:
            self._sock.close()
