"""The dashboard's settings, checked before anything starts (no web framework imported here)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from mysqlq.connection import parse_dsn
from mysqlq.errors import InvalidArgument

__all__ = ["Settings", "is_loopback"]

_PREFIX = re.compile(r"^(/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)*$")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Settings:
    dsn: str
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    allow_actions: bool = False
    # the path prefix a reverse proxy serves the dashboard under ("" or "/mysqlq")
    root_path: str = ""
    # addresses whose X-Forwarded-For/-Proto are believed (uvicorn's forwarded_allow_ips)
    forwarded_allow_ips: str = "127.0.0.1"
    refresh: float = 2.0  # seconds between a page's refreshes
    sample_interval: float = 5.0  # seconds between the history's samples
    history: float = 900.0  # seconds of history kept
    pool_size: int = 4
    access_log: bool = False

    def check(self) -> Settings:
        """Raise InvalidArgument for settings that cannot work or are unsafe; return self."""
        if not 0 <= self.port <= 65535:
            raise InvalidArgument(f"--port must be 0 to 65535, not {self.port}")
        if self.root_path and (not _PREFIX.match(self.root_path) or self.root_path == "/"):
            raise InvalidArgument(
                f"--root-path must look like /mysqlq (no trailing slash), not {self.root_path!r}"
            )
        if self.token is not None and len(self.token) < 16:
            raise InvalidArgument("the dashboard token must be at least 16 characters")
        if self.allow_actions and not self.token and not is_loopback(self.host):
            raise InvalidArgument(
                f"--allow-actions on {self.host} (not a loopback address) needs a token: "
                "give --token or set MYSQLQ_DASHBOARD_TOKEN"
            )
        for name, value, low in (
            ("--refresh", self.refresh, 0.2),
            ("--sample-interval", self.sample_interval, 0.1),
            ("--history", self.history, 10.0),
        ):
            if not low <= value <= 86400:
                raise InvalidArgument(f"{name} must be {low:g} to 86400 seconds, not {value:g}")
        if not 1 <= self.pool_size <= 64:
            raise InvalidArgument(f"the pool size must be 1 to 64, not {self.pool_size}")
        return self

    @property
    def where(self) -> str:
        """host:port/database of the DSN, for the page's header (no user, no password)."""
        url = parse_dsn(self.dsn)
        port = f":{url.port}" if url.port else ""
        return f"{url.host or 'localhost'}{port}/{url.database or ''}"

    @property
    def exposed(self) -> bool:
        """Listening beyond this machine without a token."""
        return not self.token and not is_loopback(self.host)
