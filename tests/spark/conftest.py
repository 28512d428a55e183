"""A SparkSession for the Spark tests: one per session, local[2] with task retries, tuned for
small data (UI off, one shuffle partition, the venv's python on the workers)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2,4]")  # 2 cores, a failed task is tried 4 times
        .appName("mysqlq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.sql.streaming.pollingDelay", "50ms")
        .config("spark.sql.streaming.noDataProgressEventInterval", "100ms")
        .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + str(warehouse))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    from mysqlq.spark import register

    register(session)
    yield session
    session.stop()
