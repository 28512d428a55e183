"""The ``mysqlq`` command line: the group, and one module per command that parses its arguments
and prints its results (the work is the core's, or the tooling's).

Every command takes ``--dsn`` (default: env ``MYSQLQ_DSN``). Errors raised by mysqlq print one
red line on stderr and exit with status 1.

    mysqlq migrate [--sql]                     install or upgrade the schema
    mysqlq publish TOPIC [PAYLOAD]...          publish arguments, or JSON lines from stdin
    mysqlq cancel TOPIC ID [--key K] [--group G]  cancel a message not yet delivered
    mysqlq consume TOPIC --group G             run a subscriber (prints messages as JSON lines)
    mysqlq stats [--json]                      lag, in flight, DLQ depth per topic and group
    mysqlq dlq list|show|redrive DLQ_TOPIC     inspect and redrive dead letters
    mysqlq archive list|show|purge TOPIC       read and purge what GC archived
    mysqlq dashboard [--allow-actions]         a web page of it all (needs mysqlq[dashboard])
    mysqlq gc [--limit N] [--json]             delete (or archive) what every group has passed
    mysqlq doctor [--fix] [--json] [--role R]  check event, binlog, group, primary, grants
    mysqlq grants                              GRANT statements (and access rules) per role
    mysqlq group configure GROUP TOPIC         a group's max attempts, DLQ topic and limits (admin)
    mysqlq topic configure TOPIC               a topic's partitions, retention, dedup window (admin)
    mysqlq pause|resume TOPIC [--group G]      stop or restart delivery (admin, operator)
    mysqlq schedule add|list|pause|resume|delete|run  recurring messages (admin; reader lists)
    mysqlq demo, mysqlq bench                  where the workshop (tools/, mysqlq-dev) is installed
    mysqlq spark archive|dlq-report            Spark pipelines (needs mysqlq[spark])
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

import click

from mysqlq import __version__
from mysqlq.cli.archive import archive
from mysqlq.cli.cancel import cancel
from mysqlq.cli.consume import consume
from mysqlq.cli.dashboard import dashboard
from mysqlq.cli.dlq import dlq
from mysqlq.cli.doctor import doctor
from mysqlq.cli.flow import pause, resume
from mysqlq.cli.gc import gc
from mysqlq.cli.grants import grants
from mysqlq.cli.group import group_cli
from mysqlq.cli.migrate import migrate
from mysqlq.cli.publish import publish
from mysqlq.cli.schedule import schedule_cli
from mysqlq.cli.spark import spark_group
from mysqlq.cli.stats import stats
from mysqlq.cli.topic import topic_cli

__all__ = ["main"]


class _Commands(click.Group):
    """The commands above, and those other distributions add (entry point group
    ``mysqlq.commands``: the workshop's ``demo`` and ``bench``, tools/pyproject.toml), loaded
    when asked for, so that a workshop module may import ``mysqlq.cli`` itself."""

    def _plugins(self) -> dict[str, EntryPoint]:
        return {p.name: p for p in entry_points(group="mysqlq.commands")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._plugins()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        point = None if command is not None else self._plugins().get(cmd_name)
        return point.load() if point is not None else command


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mysqlq")
def main() -> None:
    """mysqlq: a message queue in MySQL/MariaDB stored procedures."""


for _command in (
    migrate,
    publish,
    cancel,
    consume,
    stats,
    dlq,
    archive,
    dashboard,
    gc,
    doctor,
    grants,
    group_cli,
    pause,
    resume,
    schedule_cli,
    spark_group,
    topic_cli,
):
    main.add_command(_command)
