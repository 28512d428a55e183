"""Schema tests: installing and migrating the schema (mysqlq.schema), and the grants it gives."""
