"""Protocol tests: the stored procedures called directly over SQL, with an injected clock."""
