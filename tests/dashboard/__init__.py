"""Dashboard tests: ``mysqlq dashboard`` served against a real database with real traffic, read
over HTTP and in Debian's headless Chromium."""
