"""A private network of Linux network namespaces for partition tests: a bridge in the root namespace with a
/24 of 10.201.0.0/16 that no interface or route here uses yet, one namespace per host joined to it by a veth
pair, and nftables rules inside a host's namespace that drop its traffic with chosen addresses (a network
partition: packets vanish, nothing is refused) until healed.

Everything it makes is named after the test process (``hwns<pid>-<host>``, ``hwbr<pid>``) and removed on
``close`` (deleting a namespace deletes its veth pair and its nftables rules); leftovers of a test process
that died are removed at the next start. Needs root, ``ip`` (iproute2) and ``nft``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Self

from .brokerproc import BrokerProcess

_CUT_TABLE = "hwcut"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def available() -> str | None:
    """Why network namespaces cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing: apt-get install {'iproute2' if tool == 'ip' else 'nftables'}"
    probe = f"hwns{os.getpid()}-probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode:
        return f"`ip netns add` fails here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _remove_leftovers() -> None:
    """Namespaces and bridges of earlier test processes that are gone (killed before their ``close``)."""
    names = _ip("netns", "list").stdout.split()
    links = re.findall(r"^\d+: (hwbr\d+)[:@]", _ip("-o", "link", "show").stdout, re.M)
    for name in [n for n in names if re.fullmatch(r"hwns\d+-\w+", n)] + links:
        pid = int(re.findall(r"\d+", name)[0])
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            _ip(*(("netns", "del", name) if name.startswith("hwns") else ("link", "del", name)), check=False)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10.201.0.0/16 overlapping no address or route of the root namespace."""
    used = [ipaddress.ip_network(a, strict=False) for a in
            re.findall(r"inet (\d+\.\d+\.\d+\.\d+/\d+)", _ip("-o", "-4", "addr", "show").stdout)]
    used += [ipaddress.ip_network(r.split()[0]) for r in _ip("-4", "route", "show").stdout.splitlines()
             if r and r.split()[0][0].isdigit()]
    start = os.getpid() % 256
    for i in range(256):
        net = ipaddress.IPv4Network(f"10.201.{(start + i) % 256}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free /24 in 10.201.0.0/16")


class NetLab:
    """The bridge (``gateway`` is the root namespace's address on it; ``add_root_address`` gives it more,
    e.g. one for a server that a cut should separate from the clients) and the hosts' namespaces."""

    def __init__(self) -> None:
        self.tag = str(os.getpid())
        self.bridge = f"hwbr{self.tag}"[:15]
        self.net: ipaddress.IPv4Network | None = None
        self.hosts: dict[str, str] = {}  # host name -> its address
        self._next = 2

    def _address(self) -> str:
        assert self.net is not None
        address = str(self.net.network_address + self._next)
        self._next += 1
        return address

    @property
    def gateway(self) -> str:
        assert self.net is not None
        return str(self.net.network_address + 1)

    def namespace(self, host: str) -> str:
        return f"hwns{self.tag}-{host}"

    def start(self) -> Self:
        _remove_leftovers()
        self.net = _free_subnet()
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise
        return self

    def add_root_address(self) -> str:
        """One more address of the root namespace on the bridge."""
        address = self._address()
        _ip("addr", "add", f"{address}/24", "dev", self.bridge)
        return address

    def add_host(self, host: str) -> str:
        """A namespace for ``host`` on the bridge (its default route through the root namespace); its address."""
        ns, address = self.namespace(host), self._address()
        outside = f"hwv{self.tag}{host}"[:15]
        _ip("netns", "add", ns)
        self.hosts[host] = address
        _ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", outside, "master", self.bridge, "up")
        _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "route", "add", "default", "via", self.gateway)
        return address

    def cut(self, host: str, addresses: list[str]) -> None:
        """Drop every packet between ``host`` and ``addresses``, both ways (inside the host's namespace)."""
        peers = ", ".join(addresses)
        rules = (f"table inet {_CUT_TABLE} {{\n"
                 f" chain out {{\n  type filter hook output priority 0;\n  ip daddr {{ {peers} }} drop\n }}\n"
                 f" chain in {{\n  type filter hook input priority 0;\n  ip saddr {{ {peers} }} drop\n }}\n}}\n")
        done = subprocess.run(["ip", "netns", "exec", self.namespace(host), "nft", "-f", "-"], input=rules,
                              capture_output=True, text=True, timeout=30)
        if done.returncode:
            raise RuntimeError(f"nft in {self.namespace(host)}: {done.stderr.strip()}")

    def heal(self, host: str) -> None:
        """Remove ``host``'s cut."""
        _ip("netns", "exec", self.namespace(host), "nft", "delete", "table", "inet", _CUT_TABLE)

    def close(self) -> None:
        for host in list(self.hosts):
            _ip("netns", "del", self.namespace(host), check=False)
        self.hosts.clear()
        _ip("link", "del", self.bridge, check=False)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class NetnsBroker(BrokerProcess):
    """A ``headwater broker`` run by ``ip netns exec`` in ``host``'s namespace, listening (and advertised) on
    the host's address at ``port``. ``ip netns exec`` execs the broker, so signals reach it directly."""

    def __init__(self, lab: NetLab, host: str, log_dir: Path, *overrides: str, port: int = 9092) -> None:
        self.namespace, self.address = lab.namespace(host), lab.hosts[host]
        super().__init__(log_dir, *overrides, f"listeners=PLAINTEXT://{self.address}:{port}", port=port)

    @property
    def bootstrap(self) -> str:
        return f"{self.address}:{self.port}"

    def _spawn(self, args: list[str], cwd: Path | None = None) -> None:
        super()._spawn(["ip", "netns", "exec", self.namespace, *args], cwd)
