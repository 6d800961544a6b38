"""Committed and aborted transactions interleaved on one partition, written by real transactional producers
(confluent-kafka), for the tests of what read_committed readers see."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Producer

from headwater.testing.names import unique

TIMEOUT = 30


@dataclass
class Mix:
    committed: list[bytes]  # values, in log order
    aborted: list[bytes]
    end: bytes  # a plain record written last: a reader that has it has read past every transaction

    @property
    def everything(self) -> list[bytes]:
        return [*self.committed, *self.aborted, self.end]


def write_interleaved(bootstrap: str, topic: str, rounds: int = 4, per_txn: int = 3) -> Mix:
    """``rounds`` pairs of transactions on partition 0, their batches interleaved (each record flushed
    alone): one producer's commit, the other's abort; then one non-transactional record."""
    def producer(role: str) -> Producer:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique(f"mix-{role}"), "linger.ms": 0})
        p.init_transactions(TIMEOUT)
        return p

    committer, aborter = producer("commit"), producer("abort")
    mix = Mix([], [], f"end-{topic}".encode())
    for r in range(rounds):
        committer.begin_transaction()
        aborter.begin_transaction()
        for i in range(per_txn):
            for p, kind, values in ((committer, "committed", mix.committed), (aborter, "aborted", mix.aborted)):
                value = f"{kind}-{r}-{i}".encode()
                p.produce(topic, value=value, key=b"k", partition=0)
                assert p.flush(TIMEOUT) == 0, f"{value!r} not delivered"
                values.append(value)
        committer.commit_transaction(TIMEOUT)
        aborter.abort_transaction(TIMEOUT)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=mix.end, key=b"k", partition=0)
    assert plain.flush(TIMEOUT) == 0, "the end record not delivered"
    return mix
