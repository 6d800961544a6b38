"""KIP-618's preflight: what a connector says about exactly-once delivery decides the messages."""

from __future__ import annotations

from typing import Any

from headwater.connect.api import ExactlyOnceSupport, SourceConnector, SourceTask
from headwater.connect.runtime.exactly_once import NO_PREFLIGHT, NOT_ENABLED, UNSUPPORTED, exactly_once_problems


class _Base(SourceConnector):
    answer: ExactlyOnceSupport | None = None

    def start(self, config: Any) -> None:
        pass

    def stop(self) -> None:
        pass

    def task_class(self) -> type[SourceTask]:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport | None:
        if config.get("boom"):
            raise RuntimeError("no catalog")
        return self.answer


class Supported(_Base):
    answer = ExactlyOnceSupport.SUPPORTED


class Unsupported(_Base):
    answer = ExactlyOnceSupport.UNSUPPORTED


REQUIRED = {"exactly.once.support": "Required"}


def test_required_needs_the_worker_and_the_connector() -> None:
    assert exactly_once_problems(Supported, REQUIRED, worker_enabled=True) == []
    assert exactly_once_problems(Supported, REQUIRED, worker_enabled=False) == [NOT_ENABLED]
    assert exactly_once_problems(Unsupported, REQUIRED, worker_enabled=True) == [UNSUPPORTED]
    assert exactly_once_problems(_Base, REQUIRED, worker_enabled=True) == [NO_PREFLIGHT]
    failed = exactly_once_problems(Supported, {**REQUIRED, "boom": "1"}, worker_enabled=True)
    assert len(failed) == 1 and "RuntimeError: no catalog" in failed[0]


def test_requested_or_a_bad_value_asks_nothing_of_the_connector() -> None:
    for props in ({}, {"exactly.once.support": "requested"}, {"exactly.once.support": "bogus"}):
        assert exactly_once_problems(Unsupported, props, worker_enabled=False) == []
