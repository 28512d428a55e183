"""Find a MySQL/MariaDB server for tests and scripts, or start a throwaway one.

Order of choice (:func:`find_or_start`):

1. ``MYSQLQ_TEST_DSN`` if set;
2. a server answering on 127.0.0.1:3306 as root without a password;
3. a throwaway ``mariadbd``/``mysqld`` in a temporary directory, on a free port
   of 127.0.0.1 (installing ``mariadb-server`` from the OS packages first when
   no server binary exists and we are root);
4. MySQL 8.4 in a container (testcontainers) when a Docker engine answers.

``MYSQLQ_TEST_SERVER`` forces one way: ``env``, ``system``, ``local``, ``docker``
(default ``auto``), or ``mysql``: a throwaway MySQL (9.7 today) run from a
minimal Debian unstable chroot that :func:`mysql_chroot` builds once with
``debootstrap`` and keeps in the cache directory (``MYSQLQ_CACHE_DIR``, else
``$XDG_CACHE_HOME/mysqlq``, else ``~/.cache/mysqlq``; ``MYSQLQ_MYSQL_CHROOT``
names a ready chroot instead).  Building it takes about a minute and needs root.

``python -m mysqlq_dev.localserver`` prints a root DSN (starting a server that
keeps running if needed); ``--dir DIR`` reuses the server kept in DIR,
``--stop DIR`` stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import MySQLdb

from mysqlq_dev.mysqlchroot import (
    LINKED_FROM,
    STATE_FILE,
    ChrootUnavailable,
    cache_dir,
    may_install,
    mysql_chroot,
    pid_alive,
    sweep,
)

__all__ = [
    "ExternalServer",
    "LocalServer",
    "Server",
    "ServerUnavailable",
    "answers",
    "cache_dir",
    "find_or_start",
    "mysql_chroot",
    "start_mysql",
    "throwaway",
]

TEST_DSN_ENV = "MYSQLQ_TEST_DSN"
MODE_ENV = "MYSQLQ_TEST_SERVER"
MODES = ("auto", "env", "system", "local", "mysql", "docker")
SYSTEM_DSN = "mysql://root@127.0.0.1:3306"

_SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin", "/usr/libexec")


class ServerUnavailable(RuntimeError):
    """No server could be found or started."""


class Server:
    """A server for tests: ``dsn`` is a root DSN without a database."""

    dsn: str
    started: bool = False  # True when we started it (and stop() ends it)
    can_restart: bool = False
    kind: str = "server"

    def stop(self) -> None:  # pragma: no cover - overridden
        pass

    def __repr__(self) -> str:
        from mysqlq.errors import redact_dsn

        return f"<{type(self).__name__} {redact_dsn(self.dsn)}>"


class ExternalServer(Server):
    """A server someone else runs; ``stop()`` does nothing."""

    kind = "external"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn


def answers(dsn: str, timeout: int = 2) -> bool:
    """True when a connection to ``dsn`` succeeds."""
    from mysqlq.connection import connect_kwargs

    try:
        kwargs = connect_kwargs(dsn)
        kwargs.setdefault("connect_timeout", timeout)
        conn = MySQLdb.connect(**kwargs)
    except (MySQLdb.Error, ValueError):
        return False
    conn.close()
    return True


# --------------------------------------------------------------------------- throwaway


def _which(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
        for directory in _SBIN_DIRS:
            candidate = Path(directory) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def server_binary() -> str | None:
    return _which("mariadbd", "mysqld")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer(Server):
    """A throwaway mariadbd/mysqld in its own directory, bound to 127.0.0.1.

    ``directory`` holds ``data/``, the unix socket, the error log and
    ``server.json``.  A temporary directory is removed by ``stop()``; a
    directory given by the caller is kept (the data survives a restart).

    With ``chroot`` (see :func:`mysql_chroot`) the server runs inside that
    root: ``binary`` is its path there, and the directory lives under the
    root's ``srv/`` (a ``directory`` given elsewhere becomes a link to it).
    """

    kind = "local"
    can_restart = True

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        binary: str | None = None,
        port: int | None = None,
        buffer_pool: str = "64M",
        chroot: str | Path | None = None,
    ) -> None:
        self.chroot = Path(chroot).resolve() if chroot else None
        if self.chroot is not None:
            self.binary: str | None = binary or "/usr/sbin/mysqld"
            if not (self.chroot / self.binary.lstrip("/")).is_file():
                raise ServerUnavailable(f"no {self.binary} in the chroot {self.chroot}")
            self.kind = "mysql"
        else:
            self.binary = binary or server_binary()
        if not self.binary:
            raise ServerUnavailable("no mariadbd or mysqld binary found")
        self._own_directory = directory is None
        self.directory = self._make_directory(directory)
        self.port = port
        self.buffer_pool = buffer_pool
        self.process: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.started = False
        version = subprocess.run(
            self._wrap([self.binary, "--version"]), capture_output=True, text=True, check=False
        ).stdout
        self.version = version.strip()
        self.mariadb = "mariadb" in version.lower()

    def _make_directory(self, directory: str | Path | None) -> Path:
        if self.chroot is None:
            return Path(directory or tempfile.mkdtemp(prefix="mysqlq-server-")).resolve()
        srv = self.chroot / "srv"
        srv.mkdir(exist_ok=True)
        sweep(srv)
        if directory is None:
            return Path(tempfile.mkdtemp(prefix="mysqlq-server-", dir=srv))
        directory = Path(directory).absolute()
        if directory.resolve().is_relative_to(self.chroot):
            directory.resolve().mkdir(parents=True, exist_ok=True)
            return directory.resolve()
        # the server only sees paths inside its root: keep the data there, linked from here
        directory.parent.mkdir(parents=True, exist_ok=True)
        if directory.is_dir() and not directory.is_symlink():
            if any(directory.iterdir()):
                raise ServerUnavailable(f"{directory} is not empty: cannot keep a server there")
            directory.rmdir()
        real = Path(tempfile.mkdtemp(prefix="mysqlq-kept-", dir=srv))
        (real / LINKED_FROM).write_text(str(directory))
        directory.symlink_to(real, target_is_directory=True)
        return real

    def _wrap(self, cmd: list[str]) -> list[str]:
        """``cmd`` run inside the chroot, if there is one."""
        return ["chroot", str(self.chroot), *cmd] if self.chroot is not None else cmd

    def _seen(self, path: Path) -> str:
        """``path`` as the server process sees it."""
        if self.chroot is None:
            return str(path)
        return "/" + str(path.relative_to(self.chroot))

    # paths --------------------------------------------------------------
    @property
    def datadir(self) -> Path:
        return self.directory / "data"

    @property
    def socket_path(self) -> Path:
        return self.directory / "mysqld.sock"

    @property
    def error_log(self) -> Path:
        return self.directory / "error.log"

    @property
    def dsn(self) -> str:  # type: ignore[override]
        return f"mysql://root@127.0.0.1:{self.port}"

    # lifecycle ------------------------------------------------------------
    def _user_args(self) -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []

    def initialize(self) -> None:
        if (self.datadir / "mysql").is_dir():
            return
        self.datadir.mkdir(parents=True, exist_ok=True)
        if self.mariadb:
            install_db = _which("mariadb-install-db", "mysql_install_db")
            if not install_db:
                raise ServerUnavailable("mariadb-install-db not found")
            cmd = [
                install_db,
                "--no-defaults",
                f"--datadir={self.datadir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                *self._user_args(),
            ]
        else:
            cmd = self._wrap(
                [
                    self.binary,
                    "--no-defaults",
                    "--initialize-insecure",
                    f"--datadir={self._seen(self.datadir)}",
                    *self._user_args(),
                ]
            )
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ServerUnavailable(
                f"initializing {self.datadir} failed ({' '.join(cmd)}):\n"
                f"{result.stdout[-2000:]}{result.stderr[-2000:]}"
            )

    def _command(self) -> list[str]:
        assert self.binary
        (self.directory / "tmp").mkdir(exist_ok=True)
        seen = self._seen
        cmd = [
            self.binary,
            "--no-defaults",
            f"--datadir={seen(self.datadir)}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={seen(self.socket_path)}",
            f"--pid-file={seen(self.directory / 'mysqld.pid')}",
            f"--log-error={seen(self.error_log)}",
            f"--tmpdir={seen(self.directory / 'tmp')}",
            f"--innodb-buffer-pool-size={self.buffer_pool}",
            "--max-connections=300",
            "--character-set-server=utf8mb4",
            "--skip-name-resolve",
            *self._user_args(),
        ]
        if not self.mariadb:
            # MySQL's defaults stay as users have them (binary log on, event scheduler on);
            # the binary logs of a throwaway server need not outlive a day
            cmd += ["--mysqlx=OFF", "--binlog-expire-logs-seconds=86400"]
        return self._wrap(cmd)

    def start(self, timeout: float = 60.0) -> LocalServer:
        """Initialize (first time) and start the server; wait until it answers."""
        self.initialize()
        for attempt in range(3):
            if self.port is None or attempt:
                self.port = _free_port()
            out = open(self.directory / "server.out", "ab")  # noqa: SIM115
            try:
                self.process = subprocess.Popen(
                    self._command(),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            finally:
                out.close()
            self.pid = self.process.pid
            if self._wait_ready(timeout):
                self.started = True
                self._post_start()
                self._write_state()
                return self
            if self.process.poll() is None:
                self._terminate(kill=True)
            if "already in use" not in self._log_tail():
                break
        raise ServerUnavailable(f"{self.binary} did not start:\n{self._log_tail()}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                return False
            if self.socket_path.exists():
                try:
                    conn = MySQLdb.connect(
                        unix_socket=str(self.socket_path), user="root", connect_timeout=2
                    )
                except MySQLdb.Error:
                    pass
                else:
                    conn.close()
                    return True
            time.sleep(0.1)
        return False

    def _post_start(self) -> None:
        if self.mariadb:
            return
        # MySQL's --initialize-insecure only creates root@localhost (socket)
        conn = MySQLdb.connect(unix_socket=str(self.socket_path), user="root")
        try:
            cur = conn.cursor()
            cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''")
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
        finally:
            conn.close()

    def _log_tail(self, chars: int = 3000) -> str:
        text = ""
        for path in (self.error_log, self.directory / "server.out"):
            if path.exists():
                text += path.read_text(errors="replace")[-chars:]
        return text

    def _write_state(self) -> None:
        state = {
            "pid": self.pid,
            "port": self.port,
            "socket": str(self.socket_path),
            "dsn": self.dsn,
            "binary": self.binary,
            "chroot": str(self.chroot) if self.chroot else None,
        }
        (self.directory / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")

    def _terminate(self, kill: bool = False, timeout: float = 60.0) -> None:
        pid = self.pid
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None:
                if self.process.poll() is not None:
                    break
            elif not pid_alive(pid):
                break
            time.sleep(0.05)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            if self.process is not None:
                self.process.wait(10)
        self.process = None
        self.pid = None

    def kill(self) -> None:
        """Crash the server (SIGKILL), keeping its data: for recovery tests."""
        self._terminate(kill=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def restart(self, *, crash: bool = False, timeout: float = 60.0) -> None:
        """Stop (or crash) and start again on the same port with the same data."""
        if crash:
            self.kill()
        else:
            self._terminate()
        port = self.port
        self.start(timeout)
        if self.port != port:  # pragma: no cover - port taken meanwhile
            raise ServerUnavailable(f"restarted on port {self.port}, not {port}")

    def stop(self) -> None:
        """Stop the server; remove its directory if it was a temporary one."""
        self._terminate()
        self.started = False
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    @staticmethod
    def kept_chroot(directory: str | Path) -> str | None:
        """The chroot of the server once kept in ``directory`` (None: none, or no chroot)."""
        try:
            return json.loads((Path(directory) / STATE_FILE).read_text()).get("chroot")
        except (OSError, ValueError):
            return None

    @classmethod
    def attach(cls, directory: str | Path) -> LocalServer | None:
        """The running server kept in ``directory`` (None if none answers there)."""
        directory = Path(directory).resolve()
        try:
            state = json.loads((directory / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        if not state.get("pid") or not pid_alive(int(state["pid"])):
            return None
        if not answers(state["dsn"]):
            return None
        server = cls(
            directory,
            binary=state.get("binary"),
            port=int(state["port"]),
            chroot=state.get("chroot"),
        )
        server.pid = int(state["pid"])
        server.started = True
        return server


def install_server_packages() -> bool:
    """Install mariadb-server from the OS packages (MYSQLQ_INSTALL_PACKAGES=1, root, apt)."""
    if not may_install():
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print("mysqlq: installing mariadb-server with apt-get", file=sys.stderr)
    for cmd in (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "mariadb-server"],
    ):
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            return False
    return server_binary() is not None


# --------------------------------------------------------------------------- choice


def start_local(directory: str | Path | None = None) -> LocalServer:
    if server_binary() is None and not install_server_packages():
        raise ServerUnavailable(
            "no mariadbd/mysqld binary: install mariadb-server, or set "
            "MYSQLQ_INSTALL_PACKAGES=1 (as root) to let the tools install it"
        )
    return LocalServer(directory).start()


def start_mysql(directory: str | Path | None = None, **kw: Any) -> LocalServer:
    """A throwaway MySQL from the chroot (built first if needed)."""
    try:
        root = mysql_chroot()
    except ChrootUnavailable as exc:
        raise ServerUnavailable(str(exc)) from None
    return LocalServer(directory, chroot=root, **kw).start()


def throwaway(directory: str | Path | None = None, **kw: Any) -> LocalServer:
    """A throwaway server of the flavour ``MYSQLQ_TEST_SERVER`` asks for: MySQL from the
    chroot for ``mysql``, else the machine's mariadbd/mysqld (chaos, scale)."""
    if (os.environ.get(MODE_ENV) or "").lower() == "mysql":
        return start_mysql(directory, **kw)
    return LocalServer(directory, **kw).start()


def find_or_start(mode: str | None = None, directory: str | Path | None = None) -> Server:
    """Find a server or start one (see the module documentation for the order)."""
    mode = (mode or os.environ.get(MODE_ENV) or "auto").lower()
    if mode not in MODES:
        raise ServerUnavailable(f"{MODE_ENV}={mode!r}: use one of {', '.join(MODES)}")
    if mode == "mysql":
        if directory is not None and (attached := LocalServer.attach(directory)):
            return attached
        return start_mysql(directory)
    env_dsn = os.environ.get(TEST_DSN_ENV)
    if mode in {"auto", "env"} and env_dsn:
        return ExternalServer(env_dsn)
    if mode == "env":
        raise ServerUnavailable(f"{MODE_ENV}=env but {TEST_DSN_ENV} is not set")
    if mode in {"auto", "system"}:
        if answers(SYSTEM_DSN):
            return ExternalServer(SYSTEM_DSN)
        if mode == "system":
            raise ServerUnavailable(f"no server answers at {SYSTEM_DSN}")
    errors = []
    if mode in {"auto", "local"}:
        if directory is not None and (attached := LocalServer.attach(directory)):
            return attached
        try:
            return start_local(directory)
        except ServerUnavailable as exc:
            if mode == "local":
                raise
            errors.append(str(exc))
    if mode in {"auto", "docker"}:
        from mysqlq_dev.container import ContainerServer, docker_answers

        if docker_answers():
            return ContainerServer()
        errors.append("no Docker engine answers")
    raise ServerUnavailable("no MySQL/MariaDB server available: " + "; ".join(errors))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mysqlq_dev.localserver",
        description="Print a root DSN of a MySQL/MariaDB server, starting one if needed.",
    )
    parser.add_argument("--dir", type=Path, help="keep a started server in DIR (reused later)")
    parser.add_argument("--stop", type=Path, metavar="DIR", help="stop the server kept in DIR")
    parser.add_argument("--mode", choices=MODES)
    args = parser.parse_args(argv)
    if args.stop:
        server = LocalServer.attach(args.stop)
        if server is None:
            print(f"no running server in {args.stop}", file=sys.stderr)
            return 1
        server.stop()
        print(f"stopped the server in {args.stop}", file=sys.stderr)
        return 0
    if args.mode == "docker" or (args.mode is None and os.environ.get(MODE_ENV) == "docker"):
        os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    try:
        server = find_or_start(args.mode, args.dir)
    except ServerUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if isinstance(server, LocalServer):
        print(
            f"# mysqlq: server pid {server.pid} running in {server.directory}; stop it with: "
            f"python -m mysqlq_dev.localserver --stop {server.directory}",
            file=sys.stderr,
        )
    print(server.dsn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
