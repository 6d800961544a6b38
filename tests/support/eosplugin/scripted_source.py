"""A source connector for the exactly-once tests (a ``plugin.path`` plugin): numbered records whose
transactions the test scripts. It says it supports exactly-once delivery and draws its own boundaries.

Config: ``topic``; ``count`` records in all, ``seq`` 0..count-1 (key ``str(seq)``, value ``{"seq": n}``), ``batch``
of them per poll, from the source partition ``{"source": "scripted"}`` with offset ``{"seq": n}`` (it resumes
after the stored one). With ``transaction.boundary=connector``: ``commit.every`` N asks for a commit after
each record whose seq + 1 is a multiple of N, ``abort.at`` (seqs, comma separated) for an abort after those.
``poll.ms``: how long each poll takes; ``pad``: that many characters more in each value (``"pad"``). Its RUNNING
status trace says how many times the runtime called its ``commit()`` (``commits=N``).
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from headwater.connect.api import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceConnectorConfig,
    SourceRecord,
    SourceTask,
    hookimpl,
)

PARTITION = {"source": "scripted"}


class ScriptedConfig(SourceConnectorConfig):
    topic: str = Field(alias="topic", min_length=1)
    count: int = Field(100, alias="count", ge=0)
    batch: int = Field(10, alias="batch", ge=1)
    commit_every: int = Field(0, alias="commit.every", ge=0)
    abort_at: str = Field("", alias="abort.at")
    poll_ms: int = Field(0, alias="poll.ms", ge=0)
    pad: int = Field(0, alias="pad", ge=0)


class ScriptedSourceTask(SourceTask):
    def start(self, config: dict[str, str]) -> None:
        self.config = ScriptedConfig.model_validate(config)
        stored = self.context.offset_storage_reader.offset(PARTITION)
        self.next = int(stored["seq"]) + 1 if stored else 0
        self.aborts = {int(s) for s in self.config.abort_at.split(",") if s.strip()}
        self.transactions = self.context.transaction_context()
        self.commits = 0

    def commit(self) -> None:
        self.commits += 1

    def running_trace(self) -> str:
        return f"commits={self.commits}"

    def poll(self) -> list[SourceRecord] | None:
        if self.next >= self.config.count:
            time.sleep(0.05)
            return None
        time.sleep(self.config.poll_ms / 1000)
        out = []
        for seq in range(self.next, min(self.next + self.config.batch, self.config.count)):
            value = {"seq": seq, "pad": "x" * self.config.pad} if self.config.pad else {"seq": seq}
            record = SourceRecord(self.config.topic, value, str(seq), source_partition=PARTITION,
                                  source_offset={"seq": seq})
            out.append(record)
            if self.transactions is not None:
                if seq in self.aborts:
                    self.transactions.abort_transaction(record)
                elif self.config.commit_every and (seq + 1) % self.config.commit_every == 0:
                    self.transactions.commit_transaction(record)
        self.next += len(out)
        return out

    def stop(self) -> None:
        pass


class ScriptedSourceConnector(SourceConnector):
    config_class = ScriptedConfig

    def start(self, config: Any) -> None:
        self.props = config.originals()

    def task_class(self) -> type:
        return ScriptedSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: dict[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


@hookimpl
def headwater_connectors() -> list[type]:
    return [ScriptedSourceConnector]
