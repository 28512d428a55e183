"""``mysqlq dashboard``: serve the web dashboard (needs the ``dashboard`` extra)."""

from __future__ import annotations

import click

from mysqlq.cli._common import DSN_OPTION, err_console, errors, fail
from mysqlq.dashboard import EXTRA_HINT

# the web framework's modules: missing ones mean the extra is not installed
_EXTRA_MODULES = {"starlette", "uvicorn", "jinja2", "anyio", "h11"}


@click.command()
@DSN_OPTION
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=int, default=8080, show_default=True, help="Port to listen on (0: any free)."
)
@click.option(
    "--token",
    envvar="MYSQLQ_DASHBOARD_TOKEN",
    show_envvar=True,
    help="Require this token (16+ characters) from every visitor; prefer the environment "
    "variable to the option (other users can read command lines).",
)
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Offer redrive, seek, pause and resume (each with a confirmation); needs a token, on "
    "127.0.0.1 too. "
    "Off: the dashboard only reads.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Another name the dashboard answers to (repeatable), e.g. a reverse proxy's; "
    "localhost, 127.0.0.1, [::1] and --host always are. Other Host headers get 400.",
)
@click.option(
    "--session-hours",
    type=float,
    default=12.0,
    show_default=True,
    help="Hours a browser's login lasts (logging out ends it at once).",
)
@click.option(
    "--root-path",
    default="",
    metavar="PREFIX",
    help="Path prefix when served behind a reverse proxy, e.g. /mysqlq.",
)
@click.option(
    "--forwarded-allow-ips",
    default="127.0.0.1",
    show_default=True,
    help="Proxies whose X-Forwarded-For/-Proto are believed (comma-separated; * for any).",
)
@click.option(
    "--refresh", type=float, default=2.0, show_default=True, help="Seconds between refreshes."
)
@click.option(
    "--sample-interval",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds between samples of the charts' history.",
)
@click.option(
    "--history",
    "history_minutes",
    type=float,
    default=15.0,
    show_default=True,
    help="Minutes of history the charts keep (in memory).",
)
@click.option("--access-log", is_flag=True, help="Log every request.")
def dashboard(
    dsn: str | None,
    host: str,
    port: int,
    token: str | None,
    allow_actions: bool,
    allowed_hosts: tuple[str, ...],
    session_hours: float,
    root_path: str,
    forwarded_allow_ips: str,
    refresh: float,
    sample_interval: float,
    history_minutes: float,
    access_log: bool,
) -> None:
    """Serve a web page of topics, groups, partitions, subscribers and dead letters.

    Read-only unless --allow-actions (which needs a token). Binds to 127.0.0.1 unless told
    otherwise; give a token (MYSQLQ_DASHBOARD_TOKEN) before listening anywhere else. Use an
    account with the grants of `mysqlq grants --role reader` (with --allow-actions:
    `--role operator`).
    """
    from mysqlq.connection import resolve_dsn

    try:
        from mysqlq.dashboard.server import serve
        from mysqlq.dashboard.settings import Settings
    except ImportError as exc:
        missing = (getattr(exc, "name", None) or "").split(".")[0]
        if missing not in _EXTRA_MODULES:
            raise
        fail(f"mysqlq dashboard needs its extra ({missing} is missing): {EXTRA_HINT}")
        return
    with errors(OSError):
        settings = Settings(
            dsn=resolve_dsn(dsn),
            host=host,
            port=port,
            token=token or None,
            allow_actions=allow_actions,
            allowed_hosts=allowed_hosts,
            session_lifetime=session_hours * 3600,
            root_path=root_path.rstrip("/") if root_path != "/" else "",
            forwarded_allow_ips=forwarded_allow_ips,
            refresh=refresh,
            sample_interval=sample_interval,
            history=history_minutes * 60,
            access_log=access_log,
        ).check()
        if settings.exposed:
            err_console.print(
                f"[bold yellow]warning:[/] listening on {host} without a token: anyone who "
                "reaches this port can read the queue (payloads included). Set "
                "MYSQLQ_DASHBOARD_TOKEN.",
                soft_wrap=True,
            )

        def announce(url: str) -> None:
            mode = "actions on" if allow_actions else "read-only"
            err_console.print(f"mysqlq dashboard on {url} ({mode}; Ctrl-C stops it)")

        serve(settings, announce=announce)
