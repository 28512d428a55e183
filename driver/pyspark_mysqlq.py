"""Spark finds Python data sources in installed modules named ``pyspark_*`` that define
``DefaultSource``: with ``mysqlq[spark]`` installed, ``format("mysqlq")`` needs no registration."""

from mysqlq.spark.source import MySQLQDataSource as DefaultSource

__all__ = ["DefaultSource"]
