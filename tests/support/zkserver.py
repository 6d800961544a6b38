"""A real standalone ZooKeeper from Debian's ``zookeeper`` package (its jars, no service), for the broker
cluster tests: a private data directory and a free loopback port, stopped at the end; optionally a TLS client
port (Netty, in the package's classpath) and SASL DIGEST-MD5 users as well.

The classpath is the one the package's own scripts use (/usr/share/zookeeper/bin/zkEnv.sh):
/etc/zookeeper/conf and /usr/share/java/zookeeper.jar (whose manifest names its dependencies).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import pytest

from headwater.testing import free_port, wait_until

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
CLASSPATH = f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}"
# the package's manifest leaves out Netty's codec jar, which its Netty server (the TLS port's) needs
NETTY_CODEC_JAR = Path("/usr/share/java/netty-codec.jar")
TICK_TIME_MS = 1000  # sessions may then be 2 s to 20 s long (ZooKeeper's bounds: 2 and 20 ticks)


def available() -> str | None:
    """Why ZooKeeper cannot run here (None: it can)."""
    if not ZOOKEEPER_JAR.exists():
        return f"{ZOOKEEPER_JAR} is missing: apt-get install zookeeper (.ci/run does)"
    if shutil.which("java") is None:
        return "java is missing: apt-get install openjdk-17-jre-headless"
    return None


def needs_zookeeper() -> pytest.MarkDecorator:
    """Skips a module's tests where ZooKeeper cannot run, saying why."""
    why = available()
    return pytest.mark.skipif(why is not None, reason=str(why))


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """A TLS client port and SASL DIGEST-MD5 users for ``ZooKeeperServer``: ``keystore`` a PKCS12 file with the
    server's key and certificate, ``truststore`` the PEM CA its TLS clients' certificates are checked against
    (they may present none: ``ssl.clientAuth=want``), ``users`` the SASL users and their passwords."""

    keystore: Path
    keystore_password: str
    truststore: Path
    users: dict[str, str] = field(default_factory=dict)

    def config_lines(self, host: str, secure_port: int) -> str:
        return (f"secureClientPort={secure_port}\nsecureClientPortAddress={host}\n"
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
                f"ssl.keyStore.location={self.keystore}\nssl.keyStore.password={self.keystore_password}\n"
                f"ssl.keyStore.type=PKCS12\nssl.trustStore.location={self.truststore}\nssl.trustStore.type=PEM\n"
                "ssl.clientAuth=want\n"
                "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n")

    def jaas(self) -> str:
        users = " ".join(f'user_{name}="{password}"' for name, password in self.users.items())
        return f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required {users};\n}};\n"


class ZooKeeperServer:
    """``ZooKeeperServerMain`` with a zoo.cfg of its own in ``base``; ``connect`` is its host:port (plaintext,
    unauthenticated clients), ``secure_connect`` its TLS client port when started with ``security``."""

    def __init__(self, base: Path, host: str = "127.0.0.1", security: ZooKeeperSecurity | None = None) -> None:
        self.base = Path(base)
        self.host = host  # the address it listens on (its port is free on loopback, so here too)
        self.port = 0
        self.secure_port = 0
        self.security = security
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_file = self.base / "zookeeper.log"

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def secure_connect(self) -> str:
        assert self.security is not None, "started without a TLS client port"
        return f"{self.host}:{self.secure_port}"

    def start(self, timeout: float = 60) -> Self:
        from kazoo.client import KazooClient

        self.port = free_port()
        data = self.base / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.base / "zoo.cfg"
        text = (f"tickTime={TICK_TIME_MS}\ndataDir={data}\nclientPort={self.port}\n"
                f"clientPortAddress={self.host}\nadmin.enableServer=false\nmaxClientCnxns=0\n")
        java, classpath = ["java", "-Xmx256m"], CLASSPATH
        if self.security is not None:
            classpath += f":{NETTY_CODEC_JAR}"
            self.secure_port = free_port()
            text += self.security.config_lines(self.host, self.secure_port)
            jaas = self.base / "zookeeper_jaas.conf"
            jaas.write_text(self.security.jaas())
            java.append(f"-Djava.security.auth.login.config={jaas}")
        cfg.write_text(text)
        with open(self.log_file, "ab") as out:
            self.proc = subprocess.Popen(
                [*java, "-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
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
