"""The throwaway local server (forced with MYSQLQ_TEST_SERVER=local in real use)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mysqlq.connection import connect
from mysqlq_dev import localserver, mysqlchroot

needs_binary = pytest.mark.skipif(
    localserver.server_binary() is None, reason="no mariadbd/mysqld binary"
)


@needs_binary
def test_throwaway_server_starts_answers_restarts_and_stops(monkeypatch) -> None:
    monkeypatch.delenv("MYSQLQ_TEST_DSN", raising=False)
    monkeypatch.setenv("MYSQLQ_TEST_SERVER", "local")
    server = localserver.find_or_start()
    try:
        assert isinstance(server, localserver.LocalServer) and server.started
        assert server.port != 3306
        assert server.socket_path.exists()
        conn = connect(server.dsn)
        cur = conn.cursor()
        cur.execute("SELECT @@port, @@bind_address")
        assert cur.fetchone() == (server.port, "127.0.0.1")
        cur.execute("CREATE DATABASE survives")
        cur.execute("CREATE TABLE survives.t (x INT PRIMARY KEY) ENGINE=InnoDB")
        cur.execute("INSERT INTO survives.t VALUES (1)")
        conn.close()

        server.restart(crash=True)
        conn = connect(server.dsn)
        cur = conn.cursor()
        cur.execute("SELECT x FROM survives.t")
        assert cur.fetchall() == ((1,),)
        conn.close()
    finally:
        directory = server.directory
        server.stop()
    assert not directory.exists()
    assert not localserver.answers(server.dsn)


@needs_binary
def test_module_command_keeps_a_server_running(tmp_path) -> None:
    directory = tmp_path / "srv"
    cmd = [
        sys.executable,
        "-m",
        "mysqlq_dev.localserver",
        "--mode",
        "local",
        "--dir",
        str(directory),
    ]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    dsn = first.stdout.strip()
    try:
        assert localserver.answers(dsn)
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert again.stdout.strip() == dsn  # reused, not a second server
    finally:
        stop = subprocess.run(
            [sys.executable, "-m", "mysqlq_dev.localserver", "--stop", str(directory)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert stop.returncode == 0, stop.stderr
    assert not localserver.answers(dsn)


def test_unknown_mode_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("MYSQLQ_TEST_SERVER", "bogus")
    with pytest.raises(localserver.ServerUnavailable):
        localserver.find_or_start()


def test_env_dsn_wins(monkeypatch) -> None:
    monkeypatch.setenv("MYSQLQ_TEST_DSN", "mysql://someone@127.0.0.1:1")
    monkeypatch.setenv("MYSQLQ_TEST_SERVER", "auto")
    server = localserver.find_or_start()
    assert isinstance(server, localserver.ExternalServer)
    assert server.dsn == "mysql://someone@127.0.0.1:1"
    server.stop()  # a no-op for servers we did not start


def _chroot_or_skip():
    ready = mysqlchroot.cache_dir() / "mysql-chroot" / mysqlchroot.CHROOT_READY
    if os.environ.get(localserver.MODE_ENV) != "mysql" and not ready.is_file():
        pytest.skip("the MySQL chroot is built by the MySQL run (scripts/test --server mysql)")
    return mysqlchroot.mysql_chroot()


def test_mysql_from_the_chroot_keeps_its_data_in_a_directory_given_elsewhere(tmp_path) -> None:
    """The server sees only its root: a kept directory outside it becomes a link into it, and
    the server restarts (after a crash) on its data, then is found again by attach()."""
    root = _chroot_or_skip()
    directory = tmp_path / "kept"
    server = localserver.LocalServer(directory, chroot=root).start()
    try:
        assert directory.is_symlink() and server.directory.is_relative_to(root)
        assert not server.mariadb and "9." in server.version
        conn = connect(server.dsn)
        cur = conn.cursor()
        cur.execute("SELECT @@log_bin, @@event_scheduler, @@port")
        assert cur.fetchone() == (1, "ON", server.port)  # MySQL's defaults, as users run it
        cur.execute("CREATE DATABASE survives")
        cur.execute("CREATE TABLE survives.t (x INT PRIMARY KEY)")
        cur.execute("INSERT INTO survives.t VALUES (1)")
        conn.close()
        server.restart(crash=True)
        again = localserver.LocalServer.attach(directory)
        assert again is not None and again.pid == server.pid and again.chroot == root
        conn = connect(server.dsn)
        cur = conn.cursor()
        cur.execute("SELECT x FROM survives.t")
        assert cur.fetchall() == ((1,),)
        conn.close()
    finally:
        server.stop()
        shutil.rmtree(server.directory, ignore_errors=True)
    assert not localserver.answers(server.dsn)


def test_sweep_removes_only_server_directories_nothing_will_use(tmp_path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()

    def server_dir(name: str, pid: int | None = None, age: float = 0.0) -> Path:
        d = srv / name
        d.mkdir()
        if pid is not None:
            (d / localserver.STATE_FILE).write_text(json.dumps({"pid": pid}))
        if age:
            os.utime(d, (time.time() - age, time.time() - age))
        return d

    linked = server_dir("mysqlq-kept-linked")
    (tmp_path / "link").symlink_to(linked, target_is_directory=True)
    (linked / mysqlchroot.LINKED_FROM).write_text(str(tmp_path / "link"))
    orphan = server_dir("mysqlq-kept-orphan")
    (orphan / mysqlchroot.LINKED_FROM).write_text(str(tmp_path / "gone"))
    running = server_dir("mysqlq-kept-running", pid=os.getpid())
    old = server_dir("mysqlq-server-old", age=2 * mysqlchroot.STALE_AFTER_S)
    new = server_dir("mysqlq-server-new")
    other = server_dir("something-else", age=2 * mysqlchroot.STALE_AFTER_S)
    mysqlchroot.sweep(srv)
    assert sorted(p.name for p in srv.iterdir()) == sorted(
        d.name for d in (linked, running, new, other)
    )
    assert not orphan.exists() and not old.exists()
