"""What the Postgres source says about exactly-once delivery (KIP-618's preflight), config by config."""

from __future__ import annotations

import pytest

from headwater.connect.api import ConnectorTransactionBoundaries, ExactlyOnceSupport
from headwater.connect.runtime.exactly_once import UNSUPPORTED, exactly_once_problems
from headwater.connectors.postgres import PostgresConnector

REQUIRED = {"connector.class": "PostgresConnector", "exactly.once.support": "required"}


@pytest.mark.parametrize(("settings", "answer"), [
    ({"snapshot.mode": "no_data"}, ExactlyOnceSupport.SUPPORTED),  # streaming only: resumes exactly
    ({"snapshot.mode": "never"}, ExactlyOnceSupport.SUPPORTED),
    ({"snapshot.mode": "no_data", "transaction.boundary": "interval"}, ExactlyOnceSupport.SUPPORTED),
    ({"transaction.boundary": "connector"}, ExactlyOnceSupport.SUPPORTED),  # the snapshot is one transaction
    ({"snapshot.mode": "initial_only", "transaction.boundary": "Connector"}, ExactlyOnceSupport.SUPPORTED),
    ({}, ExactlyOnceSupport.UNSUPPORTED),  # initial with poll: a killed snapshot starts over, its rows resent
    ({"snapshot.mode": "when_needed", "transaction.boundary": "poll"}, ExactlyOnceSupport.UNSUPPORTED),
    ({"snapshot.mode": "always", "transaction.boundary": "connector"}, ExactlyOnceSupport.UNSUPPORTED),
])
def test_exactly_once_support_by_snapshot_mode_and_boundary(settings: dict[str, str],
                                                            answer: ExactlyOnceSupport) -> None:
    assert PostgresConnector().exactly_once_support({**REQUIRED, **settings}) is answer
    problems = exactly_once_problems(PostgresConnector, {**REQUIRED, **settings}, worker_enabled=True)
    assert problems == ([] if answer is ExactlyOnceSupport.SUPPORTED else [UNSUPPORTED])


def test_the_task_draws_transaction_boundaries() -> None:
    assert PostgresConnector().can_define_transaction_boundaries(REQUIRED) is ConnectorTransactionBoundaries.SUPPORTED
