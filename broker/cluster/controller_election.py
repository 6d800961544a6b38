"""Controller election as Kafka's ZooKeeper mode does it: the first broker to create the ephemeral
/controller znode is the controller, and in the same transaction it raises /controller_epoch by one
(a conditional write, so two winners cannot both count the same epoch)."""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from .znodes import CONTROLLER, CONTROLLER_EPOCH, controller_data, parse_controller

__all__ = ["elect"]

log = logging.getLogger(__name__)


def elect(zk: KazooClient, broker_id: int) -> int:
    """The controller's id after running for controller when /controller is missing (-1: unreadable, which
    the next watch event reads again). Blocking: call it from a worker thread."""
    while True:
        try:
            raw, _ = zk.get(CONTROLLER)
        except NoNodeError:
            pass
        else:
            try:
                return parse_controller(raw)
            except ValueError as exc:
                log.warning("%s", exc)
                return -1
        raw_epoch, stat = zk.get(CONTROLLER_EPOCH)
        epoch = int(raw_epoch or b"0") + 1
        tx = zk.transaction()
        tx.create(CONTROLLER, controller_data(broker_id), ephemeral=True)
        tx.set_data(CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
        results = tx.commit()
        if not any(isinstance(r, Exception) for r in results):
            log.info("broker %d is the controller (controller epoch %d)", broker_id, epoch)
            return broker_id
        if not any(isinstance(r, (NodeExistsError, BadVersionError)) for r in results):
            raise next(r for r in results if isinstance(r, Exception))
        # another broker won (or raised the epoch) first: read who
