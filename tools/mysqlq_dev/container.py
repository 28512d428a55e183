"""MySQL 8.4 in a container (testcontainers), where a Docker engine answers."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

__all__ = ["ContainerServer", "docker_answers"]


class ContainerServer:
    """MySQL 8.4 in a container started with testcontainers (a ``localserver.Server``: ``dsn``,
    ``started``, ``kind``, ``stop()``)."""

    kind = "docker"
    can_restart = False

    def __init__(self, image: str = "mysql:8.4") -> None:
        try:
            from testcontainers.community.mysql import MySqlContainer
        except ImportError:
            from testcontainers.mysql import MySqlContainer

        self.container: Any = MySqlContainer(image, root_password="mysqlq")
        self.container.start()
        host = self.container.get_container_host_ip()
        port = self.container.get_exposed_port(3306)
        self.dsn = f"mysql://root:mysqlq@{host}:{port}"
        self.started = True

    def stop(self) -> None:
        self.container.stop()
        self.started = False


def docker_answers() -> bool:
    docker = shutil.which("docker")
    if not docker:
        return False
    try:
        result = subprocess.run([docker, "info"], capture_output=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0
