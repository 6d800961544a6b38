"""A distributed group whose workers talk to each other over HTTPS: each advertises its https listener
(``rest.advertised.listener=https`` beside an http one), requires client certificates and basic
authentication; a follower forwards a write to the leader over HTTPS with the caller's credentials and its own
certificate, and hands task configs to the leader (an internal request, not asked for credentials)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.brokerproc import BrokerProcess
from support.connectproc import source_config, unique
from support.restdoors import BASIC_AUTH_EXTENSION, USERS, basic, basic_auth_files, https_settings, make_pki
from support.workerproc import BROKER_OVERRIDES, Cluster

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("doors-broker")
    with BrokerProcess(base / "data", *BROKER_OVERRIDES, "num.partitions=1") as proc:
        yield proc


def test_a_follower_forwards_to_the_leader_over_https(broker: BrokerProcess, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    jaas = basic_auth_files(tmp_path / "security")
    settings = {"listeners": "http://127.0.0.1:0,https://127.0.0.1:0", "rest.advertised.listener": "https",
                **https_settings(pki, client_auth="required"), "rest.extension.classes": BASIC_AUTH_EXTENSION,
                "java.security.auth.login.config": str(jaas)}
    with Cluster(tmp_path, broker.bootstrap) as cluster:
        assert cluster.settings is not None
        cluster.settings.update(settings)
        workers = cluster.start(2)
        for w in workers:
            assert w.rest.startswith("https://"), w.rest  # the advertised listener
            w.headers, w.ssl_context = basic("admin", USERS["admin"]), pki.context(client=True)
        leader = cluster.leader()
        follower = next(w for w in workers if w is not leader)
        names = [unique("forwarded"), unique("forwarded")]
        for name in names:
            created = follower.call("POST", "/connectors", {"name": name, "config": source_config(
                tmp_path / f"{name}.txt", unique("topic"), **{"tasks.max": "1"})})
            assert created.status == 201, created  # the leader took it: forwarded over HTTPS with the credentials
        # a caller without credentials is refused by the follower itself, not forwarded
        follower.headers = {}
        refused = follower.call("POST", "/connectors", {"name": unique("x"), "config": {}})
        assert refused.status == 401, refused
        follower.headers = basic("admin", USERS["admin"])
        statuses = [cluster.wait_running(name, 1) for name in names]
        # one connector runs on the follower: its task configs reached the leader over HTTPS
        assert follower.worker_id in {st["connector"]["worker_id"] for st in statuses}, statuses
