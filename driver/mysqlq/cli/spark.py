"""``mysqlq spark archive|dlq-report``: the options of :mod:`mysqlq.spark.jobs`, which needs
pyspark and pyarrow (``pip install 'mysqlq[spark]'``)."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from mysqlq.cli._common import (
    DSN_OPTION,
    console,
    echo_json,
    err_console,
    errors,
    fail,
    markup,
)

MASTER_OPTION = click.option(
    "--master",
    help="Spark master (default: spark-submit's, else local[2]).",
)


def _spark_session(master: str | None) -> Any:
    try:
        from mysqlq.spark import jobs
    except ImportError as exc:
        fail(f"the spark commands need pyspark and pyarrow: pip install 'mysqlq[spark]' ({exc})")
    return jobs, jobs.session(master, app_name="mysqlq-spark")


@click.group("spark")
def spark_group() -> None:
    """Spark pipelines (pip install 'mysqlq[spark]'); also runnable with spark-submit."""


@spark_group.command("archive")
@DSN_OPTION
@click.option("--path", required=True, help="Root of the Parquet archive (local, hdfs://, s3a://).")
@click.option("--topic", "topics", multiple=True, help="Only this topic (repeatable).")
@click.option("--partitions", type=click.IntRange(1), help="Spark partitions per topic read.")
@MASTER_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a line.")
def spark_archive(
    dsn: str | None,
    path: str,
    topics: tuple[str, ...],
    partitions: int | None,
    master: str | None,
    as_json: bool,
) -> None:
    """Copy messages every subscribed group has passed to Parquet, by topic and date.

    Run it more often than the topics' retention, so that it sees messages before GC deletes
    them. A rerun adds only what the archive does not hold yet.
    """
    jobs, spark = _spark_session(master)
    with errors():
        result = jobs.archive(
            spark, dsn, path, topics=list(topics) or None, num_partitions=partitions
        )
    if as_json:
        echo_json(result.as_dict())
        return
    console.print(
        f"archived {result.archived:,} messages of {result.partitions:,} partitions "
        f"({markup(', '.join(result.topics)) or 'nothing new'}) to {markup(path)}"
    )
    if result.missed:
        err_console.print(
            f"[yellow]warning:[/] {result.missed:,} messages were deleted by GC before they "
            "were archived: run the archive more often, or raise the topics' retention"
        )


@spark_group.command("dlq-report")
@DSN_OPTION
@click.option("--output", help="Write the report as Parquet here (replacing it).")
@click.option("--topic", "topics", multiple=True, help="DLQ topic to read (default: all).")
@click.option(
    "--limit", type=click.IntRange(1), default=50, show_default=True, help="Rows to print."
)
@MASTER_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
def spark_dlq_report(
    dsn: str | None,
    output: str | None,
    topics: tuple[str, ...],
    limit: int,
    master: str | None,
    as_json: bool,
) -> None:
    """Dead letters grouped by topic, group, error and day (UTC)."""
    jobs, spark = _spark_session(master)
    with errors():
        report = jobs.dlq_report(spark, dsn, output=output, topics=list(topics) or None)
        rows = [r.asDict() for r in report.limit(limit).collect()]
    if as_json:
        for r in rows:
            echo_json(r)
        return
    if not rows:
        err_console.print("no dead letters")
        return
    table = Table(title="dead letters")
    for col in ("day", "topic", "group", "error", "DLQ topic", "messages", "attempts"):
        table.add_column(
            col, overflow="fold", justify="right" if col in {"messages", "attempts"} else "left"
        )
    for r in rows:
        table.add_row(
            str(r["day"]),
            markup(str(r["topic"])),
            markup(str(r["group"])),
            markup(str(r["error"])[:120]),
            markup(str(r["dlq_topic"])),
            f"{r['messages']:,}",
            f"{r['attempts'] or 0:,}",
        )
    console.print(table)
    if output:
        err_console.print(f"report written to {markup(output)}")
