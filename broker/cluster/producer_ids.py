"""Producer ids unique in the cluster, as Kafka's ZooKeeper mode reserves them: blocks of ids taken from the
znode ``/latest_producer_id_block`` (``{"version":1,"broker":N,"block_start":"S","block_end":"E"}``, the
last block handed out, ``block_end`` inclusive, numbers as strings as Kafka writes them), each reservation a
write conditional on the znode's version, so two brokers never get the same block. Without this every broker
would count from its own file and two idempotent producers could share an id (and so one sequence)."""

from __future__ import annotations

import json

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

__all__ = ["PRODUCER_ID_BLOCK", "reserve_producer_id_block"]

PRODUCER_ID_BLOCK = "/latest_producer_id_block"


def _block(broker_id: int, start: int, size: int) -> bytes:
    return json.dumps({"version": 1, "broker": broker_id, "block_start": str(start),
                       "block_end": str(start + size - 1)}).encode()


def reserve_producer_id_block(zk: KazooClient, broker_id: int, size: int, timeout: float) -> int:
    """The first id of a block of ``size`` ids no other broker gets. Each ZooKeeper call waits at most
    ``timeout`` seconds (kazoo's timeout error when ZooKeeper does not answer: the caller's request fails
    and its client tries again), as it runs on the request's path; without a connection it fails at once."""
    if not zk.connected:
        raise RuntimeError(f"no ZooKeeper connection to reserve producer ids at {PRODUCER_ID_BLOCK}")
    while True:
        try:
            raw, stat = zk.get_async(PRODUCER_ID_BLOCK).get(timeout=timeout)
        except NoNodeError:
            try:
                zk.create_async(PRODUCER_ID_BLOCK, _block(broker_id, 0, size), makepath=True).get(timeout=timeout)
                return 0
            except NodeExistsError:
                continue  # another broker reserved the first block meanwhile
        start = int(json.loads(raw)["block_end"]) + 1
        try:
            zk.set_async(PRODUCER_ID_BLOCK, _block(broker_id, start, size), version=stat.version).get(timeout=timeout)
            return start
        except BadVersionError:
            continue  # another broker reserved the block first: the next one
