"""Data watches on many znodes (the partitions' state znodes) with kazoo's asynchronous calls.

kazoo's DataWatch recipe reads a znode again with a blocking call in kazoo's one event thread, so a change of
N znodes is read back one round trip after the other; here every read is sent at once (pipelined on the
session) and its answer handed on as it comes. A data watch is set by each read (``exists`` while the znode
is missing); kazoo drops every watch when the connection goes, so all watched znodes are read again on
reconnection, as kazoo's recipes do.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import WatchedEvent, ZnodeStat

__all__ = ["DataWatches"]

log = logging.getLogger(__name__)

Deliver = Callable[[str, bytes, ZnodeStat], None]


class DataWatches:
    def __init__(self, zk: KazooClient, deliver: Deliver) -> None:
        """``deliver(path, data, stat)`` is called (in kazoo's threads) with every read of a watched znode."""
        self.zk = zk
        self._deliver = deliver
        self._paths: set[str] = set()
        self._lock = threading.Lock()  # _paths: changed in the event loop, read in kazoo's threads
        self._connected = True
        zk.add_listener(self._on_state)

    def watch(self, paths: list[str]) -> None:
        with self._lock:
            self._paths.update(paths)
        for path in paths:
            self._read(path)

    def unwatch(self, paths: list[str]) -> None:
        with self._lock:
            self._paths.difference_update(paths)

    def close(self) -> None:
        self.zk.remove_listener(self._on_state)
        with self._lock:
            self._paths.clear()

    def _watched(self, path: str | None) -> bool:
        with self._lock:
            return path in self._paths

    def _read(self, path: str) -> None:
        try:
            self.zk.get_async(path, watch=self._on_event).rawlink(functools.partial(self._got, path))
        except KazooException as exc:  # not connected: the reconnection reads everything again
            log.debug("reading %s: %s", path, exc)

    def _on_event(self, event: WatchedEvent) -> None:
        if event.path is not None and self._watched(event.path):
            self._read(event.path)

    def _got(self, path: str, result: Any) -> None:
        try:
            data, stat = result.get()
        except NoNodeError:  # not made yet: watch for its creation
            self.zk.exists_async(path, watch=self._on_event).rawlink(functools.partial(self._exists, path))
            return
        except KazooException as exc:  # connection lost: the reconnection reads everything again
            log.debug("reading %s: %s", path, exc)
            return
        if self._watched(path):
            self._deliver(path, data, stat)

    def _exists(self, path: str, result: Any) -> None:
        try:
            stat = result.get()
        except KazooException as exc:
            log.debug("watching %s: %s", path, exc)
            return
        if stat is not None:  # made meanwhile
            self._read(path)

    def _on_state(self, state: str) -> None:
        """kazoo's connection thread: nothing blocking here."""
        if state != KazooState.CONNECTED:
            self._connected = False
        elif not self._connected:
            self._connected = True
            self.zk.handler.spawn(self._read_all)

    def _read_all(self) -> None:
        with self._lock:
            paths = list(self._paths)
        for path in paths:
            self._read(path)
