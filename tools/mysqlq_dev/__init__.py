"""Tooling above the core and the CLI: the server harness (``localserver``, ``harness``), the demo,
the benchmark (``bench``), the chaos harness and the scale script."""
