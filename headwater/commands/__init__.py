"""The operator's commands beside the servers: ``headwater topics``, ``groups``, ``produce``, ``consume``
and ``connectors``, on the conventions of Kafka's scripts and kcat. Each prints a table for people and
JSON with ``--json``; addresses default to ``make run``'s (broker 127.0.0.1:9092, REST API
http://127.0.0.1:8083)."""

from __future__ import annotations

import argparse

__all__ = ["BOOTSTRAP", "URL", "add_commands"]

BOOTSTRAP = "127.0.0.1:9092"
URL = "http://127.0.0.1:8083"


def add_commands(sub: argparse._SubParsersAction) -> None:
    from . import connectors, groups, records, topics

    for module in (topics, groups, records, connectors):
        module.add_parser(sub)
