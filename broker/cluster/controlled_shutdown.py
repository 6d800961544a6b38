"""The controller's side of a controlled shutdown (ControlledShutdown, key 7: broker/apis/k07_controlled_shutdown.py),
as Kafka's ZooKeeper-mode controller does it (KafkaController.doControlledShutdown); the broker's side, which asks
before it stops, is broker/server/controlled_shutdown.py.

A broker about to stop names itself and its broker epoch (its registration znode's czxid). The controller refuses
an epoch older than the registration it knows (STALE_BROKER_EPOCH: the request comes from a broker that has
registered again since) and a broker that is not registered (BROKER_NOT_AVAILABLE "Broker id N does not exist.").
Otherwise the broker is *shutting down* until its registration goes: live, but eligible for nothing
(broker/cluster/election.py's ``shutting_down``: elected nowhere, in no new ISR). Of the partitions it is a replica of,
with more than one replica and of topics not being deleted:

- each one it leads gets the first replica (assignment order) that is live, in the ISR and not shutting down, the ISR
  losing the brokers shutting down (Kafka's ControlledShutdownPartitionLeaderElectionStrategy); with no such
  replica it keeps its leader;
- it leaves the ISR of each one it follows (Kafka's OfflineReplica transition), and what else the controller's
  decision finds due there is written with it.

Every write raises the leader epoch by one and is fenced by /controller_epoch, as all of the controller's. A write
that loses to another (a leader's ISR change) is decided again on the new state. The answer names the partitions the
broker still leads (with more than one replica): the broker asks again later, or stops with them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError
from .election import elect_for_shutdown
from .znodes import ClusterView

if TYPE_CHECKING:
    from ..replication.state import PartitionState
    from .controller_api import ControllerApi
    from .topic_sync import Key

__all__ = ["UNKNOWN_BROKER_EPOCH", "ControlledShutdowns"]

log = logging.getLogger(__name__)

UNKNOWN_BROKER_EPOCH = -1  # v0-v1 carry none (Kafka's AbstractControlRequest.UNKNOWN_BROKER_EPOCH): not checked
_TRIES = 5  # a partition whose state changed under the write is decided again
_RETRY_WAIT = 2.0  # seconds for such a partition's new state to reach the view


class ControlledShutdowns:
    def __init__(self, controller: ControllerApi) -> None:
        self.controller = controller
        self._epochs: dict[int, int] = {}  # the live brokers' epochs, as the view last said
        self._shutting_down: dict[int, int] = {}  # broker id -> the epoch of the registration shutting down
        self.shutting_down: frozenset[int] = frozenset()  # its keys: Kafka's ``shuttingDownBrokerIds``

    def view_changed(self, view: ClusterView) -> None:
        """A broker whose registration went, or was made again (a new epoch), is no longer shutting down."""
        self._epochs = {broker_id: b.epoch for broker_id, b in view.brokers.items()}
        for broker_id, epoch in list(self._shutting_down.items()):
            if self._epochs.get(broker_id) != epoch:
                del self._shutting_down[broker_id]
                log.info("broker %d is no longer shutting down (its registration went)", broker_id)
        self.shutting_down = frozenset(self._shutting_down)

    def forget(self) -> None:
        """This broker became (or stopped being) the controller: no broker is known to shut down (Kafka clears
        them when a controller takes over)."""
        self._shutting_down.clear()
        self.shutting_down = frozenset()

    async def shut_down(self, broker_id: int, broker_epoch: int) -> list[Key]:
        """Move the broker's leaderships and take it out of the ISRs; the partitions it still leads. BrokerError:
        NOT_CONTROLLER, BROKER_NOT_AVAILABLE, STALE_BROKER_EPOCH."""
        async with self.controller.acting():
            epoch = self._epochs.get(broker_id)
            if epoch is None or broker_id not in self.controller.live:
                raise BrokerError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker id {broker_id} does not exist.")
            if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < epoch:
                message = (f"Received controlled shutdown request from an old broker epoch {broker_epoch} for broker "
                           f"{broker_id}. Current broker epoch is {epoch}.")
                log.info("%s", message)
                raise BrokerError(ErrorCode.STALE_BROKER_EPOCH, message)
            log.info("Shutting down broker %d", broker_id)
            self._shutting_down[broker_id] = epoch
            self.shutting_down = frozenset(self._shutting_down)
            await self._move(broker_id)
            remaining = self._led_by(broker_id)
        if remaining:
            log.info("controlled shutdown of broker %d: %d partitions it leads have no other in-sync replica to move "
                     "to: %s", broker_id, len(remaining), ", ".join(f"{t}-{p}" for t, p in remaining))
        return remaining

    def _keys_of(self, broker_id: int) -> set[Key]:
        """The partitions to act on: the broker's replicas with more than one replica, of topics not being deleted."""
        sync = self.controller.sync
        return {(name, index) for name, meta in sync.topics.items() if name not in sync.deleting
                for index, replicas in meta.assignment.items() if broker_id in replicas and len(replicas) > 1}

    def _led_by(self, broker_id: int) -> list[Key]:
        """Kafka's ``partitionLeadersOnBroker``: what the broker leads with more than one replica, not being deleted."""
        sync = self.controller.sync
        return sorted((name, index) for name, index in self._keys_of(broker_id)
                      if (state := sync.topics[name].states.get(index)) is not None and state.leader == broker_id)

    async def _move(self, broker_id: int) -> None:
        sync = self.controller.sync
        keys = self._keys_of(broker_id)
        for _ in range(_TRIES):
            writes = [(name, index, state, False) for name, index in sorted(keys)
                      if (state := self._decide(broker_id, name, index)) is not None]
            if not writes:
                return
            written = await self.controller.write(writes)
            keys = {(name, index) for name, index, _, _ in writes if (name, index) not in written}
            if not keys:
                return
            # (changed meanwhile: decided again once the view has the new state)
            await sync.wait_for_new_states({key: sync.state_version(*key) for key in keys}, _RETRY_WAIT)
        log.warning("controlled shutdown of broker %d: the states of %s kept changing under the writes", broker_id,
                    ", ".join(f"{t}-{p}" for t, p in sorted(keys)))

    def _decide(self, broker_id: int, name: str, index: int) -> PartitionState | None:
        controller = self.controller
        meta = controller.sync.topics.get(name)
        state = meta.states.get(index) if meta is not None else None
        if meta is None or state is None or index not in meta.assignment:
            return None  # gone meanwhile, or not elected yet (no leadership to move)
        if state.leader == broker_id:
            return elect_for_shutdown(meta.assignment[index], state, controller.live, self.shutting_down,
                                      controller.epoch)
        return controller.decision(name, index)  # which takes the broker out of the ISR
