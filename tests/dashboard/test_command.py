"""``mysqlq dashboard`` as a command: it serves from a real process, the rest of the command line
starts without the web framework, and a missing extra or an unsafe setting is one clear line."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

from click.testing import CliRunner
from helpers.dashboard import fetch
from helpers.testdb import ROOT

import mysqlq
from mysqlq.cli import main

TOKEN = "a-token-of-the-command-test"
WEB = ("starlette", "uvicorn", "jinja2", "anyio", "h11", "playwright")


def python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT / "driver"), **env}
    return subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=60
    )


def test_the_command_line_loads_no_web_framework():
    proc = python(
        "import json, sys\n"
        "from mysqlq.cli import main\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {WEB!r})))\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
    result = CliRunner().invoke(main, ["--help"])
    assert "dashboard" in result.output
    result = CliRunner().invoke(main, ["dashboard", "--help"])
    assert result.exit_code == 0 and "--allow-actions" in result.output
    assert "MYSQLQ_DASHBOARD_TOKEN" in result.output


def test_without_the_extra_it_says_what_to_install():
    proc = python(
        "import sys\n"
        "class NoWeb:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('starlette', 'uvicorn'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoWeb())\n"
        "from mysqlq.cli import main\n"
        "main(['dashboard', '--dsn', 'mysql://root@127.0.0.1:1/x'])\n"
    )
    assert proc.returncode == 1
    assert "pip install 'mysqlq[dashboard]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unsafe_or_impossible_settings_are_one_line():
    runner = CliRunner()
    dsn = "mysql://root@127.0.0.1:1/nothing?connect_timeout=2"
    result = runner.invoke(
        main, ["dashboard", "--dsn", dsn, "--host", "0.0.0.0", "--allow-actions"]
    )
    assert result.exit_code == 1 and "needs a token" in result.output
    result = runner.invoke(main, ["dashboard", "--dsn", dsn, "--token", "short"])
    assert result.exit_code == 1 and "at least 16 characters" in result.output
    # listening on every address without a token is allowed for reading, with a warning; the
    # database that is not there then ends it with one line
    result = runner.invoke(main, ["dashboard", "--dsn", dsn, "--host", "0.0.0.0"])
    assert result.exit_code == 1
    assert "without a token" in result.output and "error:" in result.output
    assert "Traceback" not in result.output


def test_the_command_serves_until_sigterm(dsn):
    with mysqlq.connect(dsn) as client:
        client.subscribe("ops", "payments")
        client.publish("payments", b"{}", key="k")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "driver"), "MYSQLQ_DASHBOARD_TOKEN": TOKEN}
    cmd = [sys.executable, "-m", "mysqlq.cli", "dashboard", "--dsn", dsn, "--port", "0"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
    try:
        deadline = time.monotonic() + 30
        url = None
        while url is None:
            assert time.monotonic() < deadline, "the dashboard never said where it listens"
            assert proc.poll() is None, "the dashboard exited"
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            found = re.search(r"mysqlq dashboard on (http://127\.0\.0\.1:\d+/) \(read-only", line)
            url = found.group(1) if found else None
        assert fetch(url).status == 401
        page = fetch(url, headers={"Authorization": f"Bearer {TOKEN}"})
        assert page.status == 200 and 'data-topic="payments"' in page.text
        api = fetch(url + "api/overview", headers={"Authorization": f"Bearer {TOKEN}"}).json()
        assert [g["group_name"] for g in api["groups"]] == ["ops"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
