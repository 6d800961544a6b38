"""SCRAM users managed over the wire (KIP-554: DescribeUserScramCredentials, AlterUserScramCredentials) with
confluent-kafka's and kafka-python's admin clients: created, described, deleted, refused as Kafka refuses
them, kept across a restart, stored salted (no password, no salted password in the file), and guarded by
the cluster ACLs."""

from __future__ import annotations

import base64
import hashlib
import stat
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.admin import KafkaAdminClient
from kafka.admin import ScramMechanism as KScramMechanism
from kafka.admin import UserScramCredentialDeletion as KDeletion
from kafka.admin import UserScramCredentialUpsertion as KUpsertion
from kafka.errors import ClusterAuthorizationFailedError
from kafka.protocol.admin import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
from support.brokerproc import BrokerProcess
from support.rawkafka import Conn

pytestmark = pytest.mark.timeout(120)
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
CREDENTIALS_FILE = "headwater-scram-credentials.json"


def upsert(user: str, mech: ScramMechanism, iterations: int, password: str,
           salt: bytes | None = None) -> UserScramCredentialUpsertion:
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, iterations), password.encode(), salt)


def described(admin: AdminClient, users: list[str] | None = None) -> dict[str, set[tuple[str, int]]]:
    """user -> {(mechanism name, iterations)}; a user the broker answered with an error is left out."""
    answer: Any = admin.describe_user_scram_credentials(users)  # one future for all users, else one per user
    if users is None:
        found = answer.result(10)
    else:
        found = {}
        for user, fut in answer.items():
            try:
                found[user] = fut.result(10)
            except KafkaException:
                continue
    return {u: {(i.mechanism.name, i.iterations) for i in d.scram_credential_infos} for u, d in found.items()}


def error_of(fut: Future[Any]) -> KafkaError | None:
    try:
        fut.result(10)
    except KafkaException as exc:
        return exc.args[0]
    return None


def test_scram_users_with_confluent_kafka(tmp_path: Path) -> None:
    salt = b"fixed-salt-for-this-test"
    with BrokerProcess(tmp_path / "data") as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        results = admin.alter_user_scram_credentials([
            upsert("alice", SHA512, 8192, "alice-secret", salt),
            upsert("bob", SHA256, 4096, "bob-secret")])
        assert {user: error_of(f) for user, f in results.items()} == {"alice": None, "bob": None}
        # a second mechanism for alice in a request of its own (twice in one request is refused, below)
        assert error_of(admin.alter_user_scram_credentials([upsert("alice", SHA256, 4096, "alice-secret")])["alice"]) \
            is None
        assert described(admin) == {"alice": {("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 8192)},
                                    "bob": {("SCRAM_SHA_256", 4096)}}
        assert described(admin, ["bob"]) == {"bob": {("SCRAM_SHA_256", 4096)}}
        per_user: Any = admin.describe_user_scram_credentials(["nobody"])
        missing = error_of(per_user["nobody"])
        assert missing is not None and missing.code() == KafkaError.RESOURCE_NOT_FOUND

        # iterations out of Kafka's range: refused with UNACCEPTABLE_CREDENTIAL, nothing changed
        for iterations, message in ((1024, "Too few iterations"), (20000, "Too many iterations")):
            err = error_of(admin.alter_user_scram_credentials([upsert("carol", SHA512, iterations, "pw")])["carol"])
            assert err is not None and err.code() == KafkaError.UNACCEPTABLE_CREDENTIAL
            assert message in err.str()
        assert "carol" not in described(admin)

        # delete bob's only credential: bob is gone; deleting it again is RESOURCE_NOT_FOUND
        assert error_of(admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", SHA256)])["bob"]) is None
        again = error_of(admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", SHA256)])["bob"])
        assert again is not None and again.code() == KafkaError.RESOURCE_NOT_FOUND
        assert set(described(admin)) == {"alice"}

        proc.restart()
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        assert described(admin) == {"alice": {("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 8192)}}

    stored = tmp_path / "data" / CREDENTIALS_FILE
    text = stored.read_text()
    salted = hashlib.pbkdf2_hmac("sha512", b"alice-secret", salt, 8192)
    for secret in (b"alice-secret", b"bob-secret", salted):
        assert secret.decode("latin-1") not in text
        assert base64.b64encode(secret).decode() not in text and secret.hex() not in text
    assert base64.b64encode(salt).decode() in text  # the salt is kept, as Kafka keeps it
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600


def test_scram_users_with_kafka_python(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as proc:
        admin = KafkaAdminClient(bootstrap_servers=proc.bootstrap, client_id="scram-admin")
        try:
            assert admin.alter_user_scram_credentials([
                KUpsertion("dave", KScramMechanism.SCRAM_SHA_512, "dave-secret", iterations=4096),
                KUpsertion("erin", KScramMechanism.SCRAM_SHA_256, "erin-secret", iterations=16384)]) \
                == {"dave": None, "erin": None}
            everyone = admin.describe_user_scram_credentials()
            infos = {u: [(c["mechanism"], c["iterations"]) for c in d["credential_infos"]] for u, d in everyone.items()}
            assert infos == {"dave": [(KScramMechanism.SCRAM_SHA_512, 4096)],
                             "erin": [(KScramMechanism.SCRAM_SHA_256, 16384)]}
            some = admin.describe_user_scram_credentials(["erin", "nobody"])
            assert some["erin"]["error"] is None
            assert some["nobody"]["error"] == "Attempt to describe a user credential that does not exist: nobody"
            assert admin.alter_user_scram_credentials([KDeletion("erin", KScramMechanism.SCRAM_SHA_256)]) \
                == {"erin": None}
            assert set(admin.describe_user_scram_credentials()) == {"dave"}
        finally:
            admin.close()


def test_alter_refuses_each_bad_entry_as_kafka(tmp_path: Path) -> None:
    """Per-user errors of one request, sent raw so that what the clients check before sending does not
    hide what the broker answers; the good entry beside them still applies."""
    good = ("gina", 2, 4096, b"salt", hashlib.pbkdf2_hmac("sha512", b"pw", b"salt", 4096))
    with BrokerProcess(tmp_path / "data") as proc, Conn(proc.port) as conn:
        resp = conn.call(AlterUserScramCredentialsRequest[0](
            deletions=[("nobody", 2), ("", 1)],
            upsertions=[("twice", 2, 4096, b"s", b"p"), ("strange", 3, 4096, b"s", b"p"), good,
                        ("twice", 1, 4096, b"s", b"p"),
                        ("nosalt", 1, 4096, b"", b"p")]), AlterUserScramCredentialsResponse)
        answers = {r.user: (r.error_code, r.error_message) for r in resp.results}
        assert answers == {
            "twice": (KafkaError.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
            "nobody": (KafkaError.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            "": (KafkaError.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            "strange": (KafkaError.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism 3"),
            "gina": (0, None),
            "nosalt": (KafkaError.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"),
        }
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        assert described(admin) == {"gina": {("SCRAM_SHA_512", 4096)}}
        # describing a user twice is DUPLICATE_RESOURCE for that user (confluent-kafka refuses to send it)
        kp = KafkaAdminClient(bootstrap_servers=proc.bootstrap, client_id="scram-dup")
        try:
            twice = kp.describe_user_scram_credentials(["gina", "gina"])
        finally:
            kp.close()
        assert twice["gina"]["error"] == "Cannot describe SCRAM credentials for the same user twice in a single " \
                                         "request: gina"


def test_scram_admin_needs_cluster_permissions(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", "authorizer.enabled=true") as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        err = error_of(admin.alter_user_scram_credentials([upsert("hank", SHA512, 4096, "pw")])["hank"])
        assert err is not None and err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        # (describe through kafka-python: confluent-kafka 2.16.1 answers the refusal, then crashes the process
        # with a segmentation fault when it exits)
        kp = KafkaAdminClient(bootstrap_servers=proc.bootstrap, client_id="scram-denied")
        try:
            with pytest.raises(ClusterAuthorizationFailedError):
                kp.describe_user_scram_credentials()
        finally:
            kp.close()
    assert not (tmp_path / "data" / CREDENTIALS_FILE).exists()
