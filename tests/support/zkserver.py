"""A real standalone ZooKeeper from Debian's ``zookeeper`` package (its jars, no service), for the broker
cluster tests: a private data directory and a free loopback port, stopped at the end.

The classpath is the one the package's own scripts use (/usr/share/zookeeper/bin/zkEnv.sh):
/etc/zookeeper/conf and /usr/share/java/zookeeper.jar (whose manifest names its dependencies).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Self

from headwater.testing import free_port, wait_until

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
CLASSPATH = f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}"
TICK_TIME_MS = 1000  # sessions may then be 2 s to 20 s long (ZooKeeper's bounds: 2 and 20 ticks)


def available() -> str | None:
    """Why ZooKeeper cannot run here (None: it can)."""
    if not ZOOKEEPER_JAR.exists():
        return f"{ZOOKEEPER_JAR} is missing: apt-get install zookeeper (.ci/run does)"
    if shutil.which("java") is None:
        return "java is missing: apt-get install openjdk-17-jre-headless"
    return None


class ZooKeeperServer:
    """``ZooKeeperServerMain`` with a zoo.cfg of its own in ``base``; ``connect`` is its host:port."""

    def __init__(self, base: Path, host: str = "127.0.0.1") -> None:
        self.base = Path(base)
        self.host = host  # the address it listens on (its port is free on loopback, so here too)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_file = self.base / "zookeeper.log"

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 60) -> Self:
        from kazoo.client import KazooClient

        self.port = free_port()
        data = self.base / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.base / "zoo.cfg"
        cfg.write_text(f"tickTime={TICK_TIME_MS}\ndataDir={data}\nclientPort={self.port}\n"
                       f"clientPortAddress={self.host}\nadmin.enableServer=false\nmaxClientCnxns=0\n")
        with open(self.log_file, "ab") as out:
            self.proc = subprocess.Popen(
                ["java", "-Xmx256m", "-cp", CLASSPATH, "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
                stdout=out, stderr=subprocess.STDOUT)

        def answers() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return True  # exited: no point in waiting (raised below)
            client = KazooClient(hosts=self.connect, timeout=4)
            try:
                client.start(timeout=2)
                return client.exists("/") is not None
            except Exception:  # not listening yet: the wait goes on
                return False
            finally:
                client.stop()
                client.close()

        try:
            wait_until(answers, "ZooKeeper answering", timeout=timeout, interval=0.2, log=self.log_text)
        except BaseException:
            self.stop()
            raise
        if self.proc.poll() is not None:
            raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)

    def log_text(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
