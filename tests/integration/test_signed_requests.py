"""KIP-507 end to end: worker subprocesses in one group over a real broker subprocess; the session key is
read off the config topic with confluent-kafka and requests are signed here with ``hmac`` (tests/support/
signing.py), so the workers are held to the documented scheme.

An internal ``POST /connectors/{name}/tasks`` that is unsigned, signed with another key, signed with a key
the leader has rotated out, signed too long ago or replayed is refused with 403 and changes nothing; a
correctly signed one is taken; a task config naming a class other than the connector's task class is
refused with 400; with a short ``inter.worker.key.ttl.ms`` the leader of three workers keeps writing new
keys while the followers' task configs still reach it, and so does the next leader when it dies; a group
on the ``compatible`` protocol neither signs nor checks, as Kafka's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from support.brokerproc import BrokerProcess
from support.connectproc import unique, wait_for
from support.signing import session_keys, signed_headers
from support.workerproc import BROKER_OVERRIDES, Cluster, WorkerProcess

from headwater.testing.rest import Response, send

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    with BrokerProcess(tmp_path_factory.mktemp("signed-broker") / "data", *BROKER_OVERRIDES, "num.partitions=1") as b:
        yield b


def datagen(tasks: int) -> dict[str, str]:
    return {"connector.class": "DataGen", "topic": unique("signed"), "tasks.max": str(tasks), "rate.per.sec": "1"}


def post_tasks(worker: WorkerProcess, name: str, body: bytes, headers: dict[str, str]) -> Response:
    return send("POST", f"{worker.rest}/connectors/{name}/tasks", body, headers)


def task_configs(worker: WorkerProcess, name: str) -> list[dict[str, str]]:
    return [t["config"] for t in worker.ok("GET", f"/connectors/{name}/tasks")]


def current_key(cluster: Cluster, after: int = 0) -> dict[str, Any]:
    """The newest session key of the config topic, once there is one made after ``after`` (ms)."""
    assert cluster.settings is not None
    topic = cluster.settings["config.storage.topic"]

    def newest() -> dict[str, Any] | None:
        keys = session_keys(cluster.bootstrap, topic)
        return keys[-1] if keys and keys[-1]["creation-timestamp"] > after else None

    return wait_for(newest, 30, 0.2, "a session key in the config topic", cluster.logs)


def test_unsigned_forged_stale_and_replayed_task_configs_are_refused(broker: BrokerProcess, tmp_path: Path) -> None:
    with Cluster(tmp_path, broker.bootstrap) as cluster:
        workers = cluster.start(2)
        leader = cluster.leader()
        follower = next(w for w in workers if w is not leader)
        leader.ok("POST", "/connectors", {"name": "gen", "config": datagen(2)}, expect=201)
        cluster.wait_running("gen", 2)
        before = task_configs(leader, "gen")
        key = current_key(cluster)
        assert key["algorithm"] == "HmacSHA256" and len(key["key"]) == 32, key

        changed = [{**c, "topic": unique("hijacked")} for c in before]
        body = json.dumps(changed).encode()
        refusals = {
            "unsigned": {"Content-Type": "application/json"},
            "signed with another key": signed_headers(b"k" * 32, body),
            "signed three minutes ago": signed_headers(key["key"], body, int(time.time() * 1000) - 180_000),
        }
        for worker in (leader, follower):  # the follower checks before it would forward to the leader
            for what, headers in refusals.items():
                resp = post_tasks(worker, "gen", body, headers)
                assert resp.status == 403 and resp.json["error_code"] == 403, (worker.name, what, resp)
        # A signed body that is then altered is refused too: the signature covers the bytes received.
        tampered = post_tasks(leader, "gen", body.replace(b"hijacked", b"hijackeD"), signed_headers(key["key"], body))
        assert tampered.status == 403, tampered
        for w in workers:
            assert task_configs(w, "gen") == before, w.name

        # Correctly signed: taken, through the follower (forwarded with its signature) ...
        signed = signed_headers(key["key"], body)
        assert post_tasks(follower, "gen", body, signed).status == 204
        wait_for(lambda: all(task_configs(w, "gen") == changed for w in workers) or None, 20, 0.2,
                 "the signed task configs on every worker", cluster.logs)
        # ... and the same request again is a replay, at the leader as at the follower.
        for worker in (leader, follower):
            replayed = post_tasks(worker, "gen", body, signed)
            assert replayed.status == 403 and "already received" in replayed.json["message"], (worker.name, replayed)

        # task.class names the connector's own task class, nothing else (a signed request included).
        foreign = [{**c, "task.class": "headwater.connectors.file.sink.FileStreamSinkTask"} for c in changed]
        foreign_body = json.dumps(foreign).encode()
        resp = post_tasks(leader, "gen", foreign_body, signed_headers(key["key"], foreign_body))
        assert resp.status == 400 and "task.class" in resp.json["message"], resp
        assert "headwater_datagen.DataGenSourceTask" in resp.json["message"], resp.json
        assert all(task_configs(w, "gen") == changed for w in workers)


def test_keys_rotate_in_a_running_three_worker_group_and_hand_overs_keep_working(broker: BrokerProcess,
                                                                               tmp_path: Path) -> None:
    ttl_ms = 4000
    with Cluster(tmp_path, broker.bootstrap) as cluster:
        assert cluster.settings is not None
        cluster.settings["inter.worker.key.ttl.ms"] = str(ttl_ms)
        workers = cluster.start(3)
        leader = cluster.leader()
        first = current_key(cluster)
        # The leader writes a new key each time the current one is older than the TTL.
        rotated = current_key(cluster, after=first["creation-timestamp"])
        assert rotated["creation-timestamp"] - first["creation-timestamp"] >= ttl_ms, (first, rotated)
        assert rotated["key"] != first["key"]

        # Connectors created now: the assignor gives some to followers, whose task configs (made after
        # the rotation) are handed to the leader signed with the current key.
        names = [unique("rot") for _ in range(3)]
        for name in names:
            leader.ok("POST", "/connectors", {"name": name, "config": datagen(2)}, expect=201)
        statuses = {name: cluster.wait_running(name, 2, timeout=60) for name in names}
        on_followers = [n for n, st in statuses.items() if st["connector"]["worker_id"] != leader.worker_id]
        assert on_followers, statuses

        # After one more rotation a follower's connector makes new task configs (tasks.max 2 -> 3): they arrive.
        now = current_key(cluster)
        current_key(cluster, after=now["creation-timestamp"])
        name = on_followers[0]
        owner = cluster.by_id(statuses[name]["connector"]["worker_id"])
        owner.ok("PUT", f"/connectors/{name}/config", {**datagen(3), "name": name}, expect=200)
        st = cluster.wait_running(name, 3, timeout=60)
        assert st["connector"]["worker_id"] == owner.worker_id != leader.worker_id, st

        # A request signed with a key the leader has rotated out is refused.
        body = json.dumps(task_configs(leader, name)).encode()
        old = post_tasks(leader, name, body, signed_headers(first["key"], body))
        assert old.status == 403 and "invalid signature" in old.json["message"], old
        keys = session_keys(cluster.bootstrap, cluster.settings["config.storage.topic"])
        assert len({k["creation-timestamp"] for k in keys}) >= 3, keys
        assert all(w.running for w in workers)

        # The leader dies: the new one goes on rotating, and a connector created then gets its tasks.
        killed_at = int(time.time() * 1000)
        leader.kill()
        new_leader = cluster.leader(timeout=60)
        assert new_leader is not leader
        current_key(cluster, after=killed_at)
        wait_for(lambda: "distributing a new session key" in new_leader.log_text(True) or None, 30, 0.2,
                 "the new leader distributing a key", cluster.logs)
        late = unique("rot-late")
        new_leader.ok("POST", "/connectors", {"name": late, "config": datagen(4)}, expect=201)
        cluster.wait_running(late, 4, timeout=60)


def test_a_group_on_the_compatible_protocol_does_not_sign_as_in_kafka(broker: BrokerProcess, tmp_path: Path) -> None:
    with Cluster(tmp_path, broker.bootstrap) as cluster:
        assert cluster.settings is not None
        cluster.settings["connect.protocol"] = "compatible"
        (worker,) = cluster.start(1)
        worker.ok("POST", "/connectors", {"name": "gen", "config": datagen(1)}, expect=201)
        cluster.wait_running("gen", 1)
        changed = [{**c, "topic": unique("unsigned")} for c in task_configs(worker, "gen")]
        body = json.dumps(changed).encode()
        assert post_tasks(worker, "gen", body, {"Content-Type": "application/json"}).status == 204
        assert task_configs(worker, "gen") == changed
        assert session_keys(cluster.bootstrap, cluster.settings["config.storage.topic"]) == []
        assert "Internal request verification is disabled" in worker.log_text(True)
