"""Tooling tests: the command line, the test harness, local servers, chaos, the code layout."""
