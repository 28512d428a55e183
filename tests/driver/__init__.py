"""Driver tests: the Python client, subscriber, connections, errors and metrics (mysqlq core)."""
