"""The dashboard's settings, checked before anything starts (no web framework imported here)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, fields

from mysqlq.connection import parse_dsn
from mysqlq.errors import InvalidArgument

__all__ = ["SESSION_LIFETIME", "Settings", "is_loopback", "redact_dsn", "split_host"]

_PREFIX = re.compile(r"^(/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)*$")
_HOST = re.compile(r"[a-z0-9._:-]{1,253}")
_PORT = re.compile(r"[0-9]{1,5}")
SESSION_LIFETIME = 12 * 3600.0  # seconds a browser's login lasts (--session-hours)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, int | None] | None:
    """``name``, ``name:port``, ``[v6]``, ``[v6]:port`` or a bare IPv6 address -> (the host in
    lower case, without brackets or a trailing dot; the port or None); None when malformed."""
    value = value.strip().lower()
    port = ""
    if value.startswith("["):
        value, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else ""
        if rest and not port:
            return None
    elif value.count(":") == 1:
        value, _, port = value.partition(":")
        if not port:
            return None
    host = value.rstrip(".")
    if not _HOST.fullmatch(host) or (port and not _PORT.fullmatch(port)):
        return None
    if port and int(port) > 65535:
        return None
    return host, int(port) if port else None


def redact_dsn(dsn: str) -> str:
    """The DSN with ``***`` for its password, whatever characters the password has (the user
    info is everything before the last ``@``); a text that is not a URL is hidden whole."""
    scheme, sep, rest = dsn.partition("://")
    if not sep:
        return "***"
    userinfo, at, where = rest.rpartition("@")
    if not at:
        return dsn
    user, colon, _password = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{where}"


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
    # more names the Host header may give (a reverse proxy's); loopback names are always allowed
    allowed_hosts: tuple[str, ...] = ()
    session_lifetime: float = SESSION_LIFETIME  # seconds

    def __repr__(self) -> str:  # never the password or the token
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["dsn"] = redact_dsn(self.dsn)
        shown["token"] = None if self.token is None else "***"
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    __str__ = __repr__

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
        if self.allow_actions and not self.token:
            raise InvalidArgument(
                "--allow-actions needs a token, on 127.0.0.1 too (any web page this machine's "
                "browser opens could reach it): give --token or set MYSQLQ_DASHBOARD_TOKEN"
            )
        for name in self.allowed_hosts:
            if split_host(name) is None:
                raise InvalidArgument(
                    f"--allowed-host must be a host name or address (with an optional :port), "
                    f"not {name!r}"
                )
        if not 60 <= self.session_lifetime <= 30 * 86400:
            raise InvalidArgument(
                "the session lifetime (--session-hours) must be 1 minute to 30 days, not "
                f"{self.session_lifetime:g} s"
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
