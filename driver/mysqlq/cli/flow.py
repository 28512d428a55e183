"""``mysqlq pause`` and ``mysqlq resume``: stop and restart delivery to a group, or to every
group of a topic (the admin's or the operator's command)."""

from __future__ import annotations

import click

from mysqlq.cli._common import DSN_OPTION, echo_json, errors, open_client


@click.command()
@DSN_OPTION
@click.argument("topic")
@click.option("--group", help="Only this consumer group (default: the topic for every group).")
def pause(dsn: str | None, topic: str, group: str | None) -> None:
    """Pause TOPIC for every group, or only GROUP on it: fetch delivers nothing until resumed.

    Leases, heartbeats, settles of messages already in flight and publishing go on; the lag
    grows (mysqlq stats shows "paused"). Prints the flags as JSON.
    """
    with errors(), open_client(dsn) as client:
        echo_json(client.pause(topic, group))


@click.command()
@DSN_OPTION
@click.argument("topic")
@click.option("--group", help="Only this consumer group (default: the topic's own pause).")
def resume(dsn: str | None, topic: str, group: str | None) -> None:
    """Resume what mysqlq pause paused: TOPIC, or GROUP on it (a group paused on its own stays
    paused when its topic resumes, and the reverse). Prints the flags as JSON."""
    with errors(), open_client(dsn) as client:
        echo_json(client.resume(topic, group))
