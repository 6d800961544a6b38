"""Change notifications as Kafka's ZkNodeChangeNotificationListener reads them: a writer changes some znode and
then adds a persistent sequential child ``<prefix><10-digit seq>`` under a notification root naming what
changed; every broker watches the root's children, handles each child above the last it handled, in sequence
order, and deletes children older than 15 minutes (by then every live broker has seen them).

Only the reading side lives here (``pending``, in a worker thread); the caller decides what a notification's
data means and re-reads the znode it names, so a notification lost to a purge or a session expiry costs
nothing more than Kafka loses: a broker (re)starting reads everything anyway.
"""

from __future__ import annotations

import logging
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from .config_changes import CHANGE_EXPIRATION_MS

__all__ = ["SequenceNotifications"]

log = logging.getLogger(__name__)


class SequenceNotifications:
    """The notifications under ``root`` not handled yet (blocking calls: run it in a worker thread)."""

    def __init__(self, zk: KazooClient, root: str, prefix: str,
                 expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        self.zk, self.root, self.prefix, self.expiration_ms = zk, root, prefix, expiration_ms
        self.last = -1  # the sequence number of the last notification handed out

    def _seq(self, child: str) -> int | None:
        if not child.startswith(self.prefix):
            return None
        try:
            return int(child[len(self.prefix):])
        except ValueError:
            return None

    def pending(self) -> list[bytes]:
        """The data of every notification above the last one handed out, in sequence order (each handed out
        once); expired ones are deleted on the way. A notification deleted meanwhile is skipped."""
        numbered = sorted((s, c) for c in self.zk.get_children(self.root) if (s := self._seq(c)) is not None)
        now_ms = time.time() * 1000
        out: list[bytes] = []
        for seq, child in numbered:
            path = f"{self.root}/{child}"
            if seq <= self.last:
                self._purge_if_expired(path, now_ms)
                continue
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                continue
            self.last = seq
            out.append(data)
            if now_ms - stat.ctime >= self.expiration_ms:
                self._delete(path)
        return out

    def _purge_if_expired(self, path: str, now_ms: float) -> None:
        stat = self.zk.exists(path)
        if stat is not None and now_ms - stat.ctime >= self.expiration_ms:
            self._delete(path)

    def _delete(self, path: str) -> None:
        try:
            self.zk.delete(path)
            log.debug("purged the change notification %s", path)
        except NoNodeError:
            pass  # another broker purged it first
