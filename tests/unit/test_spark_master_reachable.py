"""The check a ``spark://`` master gets before a session is built: any one of an HA list that accepts a
connection will do; none accepting fails at once with each address and its reason."""

from __future__ import annotations

import socket

import pytest

from headwater.connectors.spark.session import SparkUnavailable, _check_reachable
from headwater.testing.names import free_port as closed_port


def test_a_listening_master_in_the_list_passes() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        _check_reachable(f"spark://127.0.0.1:{closed_port()},127.0.0.1:{port}")


def test_no_master_accepting_names_each_address_and_why() -> None:
    dead = closed_port()
    with pytest.raises(SparkUnavailable) as failed:
        _check_reachable(f"spark://127.0.0.1:{dead},not-an-address")
    message = str(failed.value)
    assert f"spark.master=spark://127.0.0.1:{dead},not-an-address" in message
    assert f"127.0.0.1:{dead}: [Errno 111] Connection refused" in message
    assert "not-an-address: not host:port" in message
