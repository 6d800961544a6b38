"""What the Kafka-side commands share: the bootstrap option, an admin client, sync entry points."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from aiokafka import errors as kafka_errors

from headwater.connect.kafka import clients
from headwater.connect.kafka.security import security_settings
from headwater.properties import load_properties

from . import BOOTSTRAP
from .output import fail

__all__ = ["add_bootstrap", "admin", "client_settings", "configs", "run_async"]


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", "-b", default=BOOTSTRAP, metavar="HOST:PORT",
                        help="the broker to talk to (default %(default)s)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties for a secured broker (security.protocol, sasl.mechanism, "
                             "sasl.jaas.config, ssl.truststore.location, ...), as Kafka's scripts take them")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The clients' settings of ``--command-config`` (none without it); a ValueError naming the file and the
    key that is wrong."""
    path = getattr(args, "command_config", None)
    if not path:
        return {}
    try:
        return security_settings(load_properties(path))
    except (ValueError, OSError) as exc:  # ConfigError is a ValueError
        raise ValueError(f"--command-config {path}: {exc}") from None


@asynccontextmanager
async def admin(bootstrap: str, settings: dict[str, Any] | None = None) -> AsyncIterator[Any]:
    client = clients.admin_client(bootstrap, **{"request_timeout_ms": 15000, **(settings or {})})
    await client.start()
    try:
        yield client
    finally:
        await client.close()


def configs(pairs: list[str], flag: str) -> dict[str, str]:
    """``key=value`` options as a map; a ValueError naming the flag and the pair otherwise."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def run_async(command: str, work: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run a command's coroutine; a Kafka or connection error is one line on stderr and exit 1."""
    try:
        return asyncio.run(work())
    except ValueError as exc:
        return fail(f"{command}: {exc}", 2)
    except (kafka_errors.KafkaError, OSError, TimeoutError) as exc:
        return fail(f"{command}: {type(exc).__name__}: {exc}")
