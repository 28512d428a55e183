"""A minimal Debian unstable root with MySQL's server and client, built once and cached.

MySQL is what mysqlq's users run, and the project's machines carry MariaDB: the harness runs a
real MySQL (9.7 today) from this root (``chroot <root> mysqld ...``). Building it needs root,
``debootstrap`` and Debian's archive; it takes about a minute, once.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = [
    "CACHE_ENV",
    "CHROOT_ENV",
    "CHROOT_PACKAGES",
    "CHROOT_READY",
    "INSTALL_ENV",
    "ChrootUnavailable",
    "cache_dir",
    "may_install",
    "mysql_chroot",
]

CACHE_ENV = "MYSQLQ_CACHE_DIR"
CHROOT_ENV = "MYSQLQ_MYSQL_CHROOT"
# what the MySQL chroot installs (Debian unstable carries the newest MySQL)
CHROOT_SUITE = "sid"
CHROOT_PACKAGES = ("mysql-server-core", "mysql-client")
CHROOT_READY = ".mysqlq-ready"
# the project's own scripts (scripts/test, scripts/demo, CI) set it: only then do the tools install
# OS packages (mariadb-server, debootstrap) with apt-get; the library never does by itself
INSTALL_ENV = "MYSQLQ_INSTALL_PACKAGES"
# what a server directory under the root's srv/ holds: its state, and the link that keeps it
STATE_FILE = "server.json"


class ChrootUnavailable(RuntimeError):
    """The MySQL root could not be found or built."""


def may_install() -> bool:
    """Whether the tools may install OS packages (``MYSQLQ_INSTALL_PACKAGES=1``, as root)."""
    return (
        os.environ.get(INSTALL_ENV) == "1" and os.geteuid() == 0 and bool(shutil.which("apt-get"))
    )


def cache_dir() -> Path:
    """Where built things are kept between runs (the MySQL chroot)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return (Path(base) / "mysqlq").resolve()


def _run_step(cmd: list[str], what: str, env: dict[str, str] | None = None) -> None:
    print(f"mysqlq: {what}", file=sys.stderr, flush=True)
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise ChrootUnavailable(
            f"{what} failed ({' '.join(cmd)}):\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
        )


def mysql_chroot() -> Path:
    """A Debian unstable root with MySQL's server and client installed, built once.

    ``$MYSQLQ_MYSQL_CHROOT`` if set (it must be ready), else ``<cache_dir>/mysql-chroot``,
    built on first use: ``debootstrap --variant=minbase sid``, then ``apt-get install
    mysql-server-core mysql-client`` inside it (the archive's Release file may be past its
    Valid-Until date, so that check is off).  A lock lets concurrent runs share one build;
    a half-built root is never used (it is built aside and renamed when complete).
    """
    if os.environ.get(CHROOT_ENV):
        root = Path(os.environ[CHROOT_ENV]).expanduser().resolve()
        if not (root / "usr/sbin/mysqld").is_file():
            raise ChrootUnavailable(f"{CHROOT_ENV}={root}: no usr/sbin/mysqld in it")
        return root
    cache = cache_dir()
    root = cache / "mysql-chroot"
    if (root / CHROOT_READY).is_file():
        return root
    if os.geteuid() != 0:
        raise ChrootUnavailable(
            f"building the MySQL chroot in {root} needs root (debootstrap, chroot); "
            f"or set {CHROOT_ENV} to a ready one"
        )
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "mysql-chroot.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / CHROOT_READY).is_file():  # built by another run while we waited
            return root
        _build_chroot(root)
    return root


def _debootstrap() -> str | None:
    return shutil.which("debootstrap") or (
        "/usr/sbin/debootstrap" if os.access("/usr/sbin/debootstrap", os.X_OK) else None
    )


def _build_chroot(root: Path) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _debootstrap():
        if not may_install():
            raise ChrootUnavailable(
                f"debootstrap is missing: install it, or set {INSTALL_ENV}=1 (as root) to let "
                "the tools install it with apt-get"
            )
        _run_step(["apt-get", "update"], "apt-get update (for debootstrap)", env)
        _run_step(
            ["apt-get", "install", "-y", "--no-install-recommends", "debootstrap"],
            "installing debootstrap",
            env,
        )
    building = root.with_name(root.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    _run_step(
        [_debootstrap() or "debootstrap", "--variant=minbase", CHROOT_SUITE, str(building)],
        f"debootstrap {CHROOT_SUITE} into {building} (once; about a minute)",
        env,
    )
    inside = ["chroot", str(building)]
    _run_step(
        [*inside, "apt-get", "-o", "Acquire::Check-Valid-Until=false", "update"],
        "apt-get update in the chroot",
        env,
    )
    _run_step(
        [*inside, "apt-get", "install", "-y", "--no-install-recommends", *CHROOT_PACKAGES],
        f"installing {' '.join(CHROOT_PACKAGES)} in the chroot",
        env,
    )
    _run_step([*inside, "apt-get", "clean"], "apt-get clean in the chroot", env)
    # mysqld's secure-file-priv directory must exist, or it refuses to start
    (building / "var/lib/mysql-files").mkdir(parents=True, exist_ok=True)
    (building / "srv").mkdir(exist_ok=True)
    (building / CHROOT_READY).write_text(f"{' '.join(CHROOT_PACKAGES)}\n")
    building.rename(root)


# --------------------------------------------------------------------------- srv/


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


LINKED_FROM = "linked-from"
STALE_AFTER_S = 3600


def _runs(directory: Path) -> bool:
    """Whether the server kept in ``directory`` runs, or one of those in its subdirectories (a
    group's members: tools/group.py); True when it cannot be read (removed meanwhile)."""
    try:
        candidates = [directory, *(sub for sub in directory.iterdir() if sub.is_dir())]
    except OSError:
        return True
    for d in candidates:
        try:
            state = json.loads((d / STATE_FILE).read_text())
        except (OSError, ValueError):
            continue
        if state.get("pid") and pid_alive(int(state["pid"])):
            return True
    return False


def sweep(srv: Path) -> None:
    """Remove the server directories of a chroot's ``srv/`` that nothing will use again: a kept
    one whose link is gone (a test's temporary directory was removed), a temporary one left by a
    killed run an hour ago; never one whose server (or a group member's under it) runs."""
    for d in srv.iterdir():
        if not d.is_dir() or not d.name.startswith(("mysqlq-kept-", "mysqlq-server-")):
            continue
        if _runs(d):
            continue
        if d.name.startswith("mysqlq-kept-"):
            try:
                link = Path((d / LINKED_FROM).read_text().strip())
            except OSError:
                link = None
            if link is not None and link.is_symlink() and link.resolve() == d.resolve():
                continue
        elif time.time() - d.stat().st_mtime < STALE_AFTER_S:
            continue
        shutil.rmtree(d, ignore_errors=True)
