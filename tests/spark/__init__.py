"""Spark tests: the mysqlq data source and pipelines on a local SparkSession."""
