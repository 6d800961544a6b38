"""``zookeeper.connect`` (Kafka's form ``host:port[,host:port...][/chroot]``) and the ZooKeeper session."""

from __future__ import annotations

import posixpath

__all__ = ["parse_zookeeper_connect"]


def parse_zookeeper_connect(value: str) -> tuple[str, str]:
    """``host:port,host:port/chroot`` -> (the host list, the chroot or ``""``); ValueError saying what is wrong."""
    hosts, slash, chroot = value.partition("/")
    if not hosts:
        raise ValueError(f"expected host:port[,host:port...][/chroot], got {value!r}")
    for item in hosts.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port entries separated by commas, got {item.strip()!r}")
    if not slash:
        return hosts, ""
    chroot = "/" + chroot
    if chroot.endswith("/") or posixpath.normpath(chroot) != chroot or "//" in chroot:
        raise ValueError(f"the chroot {chroot!r} must be an absolute path without a trailing '/' or '.' parts")
    return hosts, chroot
