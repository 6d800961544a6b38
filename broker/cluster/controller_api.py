"""The controller as its helpers see it (broker/cluster/reassigner.py, leader_elections.py,
controlled_shutdown.py): named by this protocol, not imported, so the controller, which holds them, and they do not
import each other."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Protocol

from kazoo.client import KazooClient

if TYPE_CHECKING:
    from ..replication.state import PartitionState
    from .topic_sync import Key, TopicSync

__all__ = ["ControllerApi"]


class ControllerApi(Protocol):
    zk: KazooClient
    sync: TopicSync
    epoch: int  # the controller epoch its writes carry
    epoch_version: int  # /controller_epoch's znode version, which its writes check

    @property
    def live(self) -> frozenset[int]: ...

    def check_active(self) -> None:
        """NOT_CONTROLLER (BrokerError) unless this broker is the active controller."""

    def acting(self) -> contextlib.AbstractAsyncContextManager[None]:
        """The controller's lock held as the active controller (NOT_CONTROLLER otherwise, or once fenced)."""

    def decision(self, name: str, index: int) -> PartitionState | None:
        """The state the controller writes over the partition's now (None: nothing to change)."""

    async def write(self, writes: list[tuple[str, int, PartitionState, bool]]) -> set[Key]:
        """The partition states written (fenced); the others changed meanwhile."""
