"""KIP-507 pieces on their own: the signature of an internal request (what it covers, each refusal and its
status), the replay guard, the session key's record and rotation rules, the worker keys' validation, and
``task.class`` never being imported."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import sys
import uuid
from pathlib import Path

import pytest

from headwater.connect.config import WorkerConfigError, load_worker_config
from headwater.connect.herder.session_key import KeyPolicy
from headwater.connect.plugins import PluginRegistry
from headwater.connect.rest.signature import (
    REPLAY_WINDOW_MS,
    ReplayGuard,
    RequestRefused,
    RequestSignature,
    sign,
)
from headwater.connect.runtime.worker import ConfigErrors, Worker
from headwater.connect.status import State, TargetState, TaskId
from headwater.connect.storage.kafka_stores import SessionKey
from headwater.connect.storage.offsets import MemoryOffsetStore

KEY = bytes(range(32))
BODY = b'[{"task.class":"x.Y","topic":"t"}]'
NOW = 1_800_000_000_000
ALGORITHMS = ["HmacSHA256"]


def refused(headers: dict[str, str], body: bytes = BODY, key: bytes = KEY, now: int = NOW,
            replays: ReplayGuard | None = None, algorithms: list[str] = ALGORITHMS) -> RequestRefused:
    with pytest.raises(RequestRefused) as info:
        RequestSignature.from_headers(headers, body).check(key, algorithms, now, replays or ReplayGuard())
    return info.value


def test_the_signature_is_an_hmac_over_the_timestamp_and_the_body() -> None:
    headers = sign(KEY, "HmacSHA256", BODY, NOW)
    expected = hmac.new(KEY, f"{NOW}\n".encode() + BODY, hashlib.sha256).digest()
    assert headers == {"X-Connect-Authorization": base64.b64encode(expected).decode(),
                       "X-Connect-Request-Signature-Algorithm": "HmacSHA256", "X-Connect-Request-Timestamp": str(NOW)}
    RequestSignature.from_headers(headers, BODY).check(KEY, ALGORITHMS, NOW + 1000, ReplayGuard())
    sha512 = sign(KEY, "HmacSHA512", BODY, NOW)["X-Connect-Authorization"]
    assert base64.b64decode(sha512) == hmac.new(KEY, f"{NOW}\n".encode() + BODY, hashlib.sha512).digest()


def test_unsigned_forged_tampered_stale_and_replayed_requests_are_refused() -> None:
    good = sign(KEY, "HmacSHA256", BODY, NOW)
    unsigned = refused({})
    assert (unsigned.status, str(unsigned)) == (403, "Internal request missing required signature")
    assert refused({k: v for k, v in good.items() if k != "X-Connect-Request-Timestamp"}).status == 403
    forged = refused(sign(b"another key of 32 bytes, not it!", "HmacSHA256", BODY, NOW))
    assert (forged.status, str(forged)) == (403, "Internal request contained invalid signature.")
    assert refused(good, body=BODY.replace(b'"t"', b'"u"')).status == 403  # the body is covered
    moved = {**good, "X-Connect-Request-Timestamp": str(NOW + 1)}  # so is the timestamp
    assert str(refused(moved)) == "Internal request contained invalid signature."
    stale = refused(good, now=NOW + REPLAY_WINDOW_MS + 1)
    assert stale.status == 403 and "stale" in str(stale)
    assert refused(good, now=NOW - REPLAY_WINDOW_MS - 1).status == 403  # from the future, as far
    not_base64 = refused({**good, "X-Connect-Authorization": "%%%"})
    assert not_base64.status == 403 and "base64" in str(not_base64)

    replays = ReplayGuard()
    RequestSignature.from_headers(good, BODY).check(KEY, ALGORITHMS, NOW, replays)
    again = refused(good, replays=replays, now=NOW + 5)
    assert again.status == 403 and "already received" in str(again)
    # a new signature of the same body (signed a millisecond later) is not a replay
    RequestSignature.from_headers(sign(KEY, "HmacSHA256", BODY, NOW + 1), BODY).check(KEY, ALGORITHMS, NOW, replays)


def test_an_algorithm_the_worker_does_not_verify_with_is_400_as_in_kafka() -> None:
    not_permitted = refused(sign(KEY, "HmacSHA512", BODY, NOW))
    assert not_permitted.status == 400 and "inter.worker.verification.algorithms" in str(not_permitted)
    unknown = refused({**sign(KEY, "HmacSHA256", BODY, NOW), "X-Connect-Request-Signature-Algorithm": "HmacMD5"})
    assert unknown.status == 400 and "HmacMD5" in str(unknown)
    RequestSignature.from_headers(sign(KEY, "HmacSHA512", BODY, NOW), BODY).check(
        KEY, ["HmacSHA256", "HmacSHA512"], NOW, ReplayGuard())


def test_the_replay_guard_forgets_what_is_past_the_window() -> None:
    guard = ReplayGuard(window_ms=1000)
    assert guard.first_time(b"a", NOW, NOW)
    assert not guard.first_time(b"a", NOW, NOW + 1000)
    assert guard.first_time(b"b", NOW + 1500, NOW + 1500)
    assert guard._seen.keys() == {b"b"}  # "a" is stale now: a request bearing it is refused before this


def test_the_session_key_record_is_kafkas_and_its_key_is_never_shown() -> None:
    key = SessionKey(KEY, "HmacSHA256", NOW)
    assert key.to_json() == {"key": base64.b64encode(KEY).decode(), "algorithm": "HmacSHA256",
                             "creation-timestamp": NOW}
    assert SessionKey.from_json(key.to_json()) == key
    assert base64.b64encode(KEY).decode() not in repr(key) and str(list(KEY)) not in repr(key)
    for bad, field in (({"algorithm": "HmacSHA256", "creation-timestamp": 1}, "'key'"),
                       ({"key": "AA==", "algorithm": "HmacSHA256", "creation-timestamp": "1"}, "'creation-timestamp'"),
                       ({"key": "!!", "algorithm": "HmacSHA256", "creation-timestamp": 1}, "'key'")):
        with pytest.raises(ValueError, match=field):
            SessionKey.from_json(bad)


def test_the_leader_replaces_a_key_that_is_missing_expired_or_made_otherwise() -> None:
    policy = KeyPolicy.of(load_worker_config(None, ["inter.worker.key.ttl.ms=60000"]))
    assert (policy.algorithm, policy.size_bytes) == ("HmacSHA256", 32)  # Java's default HmacSHA256 key: 256 bits
    key = policy.new_key(NOW)
    assert len(key.key) == 32 and key.creation_timestamp == NOW and key != policy.new_key(NOW)
    assert policy.why_replace(None, NOW) is not None
    assert policy.why_replace(key, NOW + 59_999) is None
    assert "expired" in (policy.why_replace(key, NOW + 60_000) or "")
    assert "another algorithm or size" in (policy.why_replace(SessionKey(KEY[:16], "HmacSHA256", NOW), NOW) or "")
    assert "another algorithm or size" in (policy.why_replace(SessionKey(KEY, "HmacSHA512", NOW), NOW) or "")
    sized = KeyPolicy.of(load_worker_config(None, ["inter.worker.key.generation.algorithm=HmacSHA512",
                                                   "inter.worker.key.size=1024"]))
    assert (sized.algorithm, len(sized.new_key(NOW).key)) == ("HmacSHA512", 128)


@pytest.mark.parametrize(("settings", "named"), [
    (["inter.worker.signature.algorithm=HmacSHA512"], "inter.worker.signature.algorithm"),
    (["inter.worker.verification.algorithms=HmacSHA256,HmacMD5"], "inter.worker.verification.algorithms"),
    (["inter.worker.verification.algorithms="], "inter.worker.verification.algorithms"),
    (["inter.worker.key.generation.algorithm=AES"], "inter.worker.key.generation.algorithm"),
    (["inter.worker.signature.algorithm=SHA256withRSA"], "inter.worker.signature.algorithm"),
    (["inter.worker.key.size=32"], "inter.worker.key.size"),
    (["inter.worker.key.ttl.ms=0"], "inter.worker.key.ttl.ms"),
])
def test_worker_keys_a_worker_cannot_honour_fail_at_start_naming_the_key(settings: list[str], named: str) -> None:
    with pytest.raises(WorkerConfigError, match=named.replace(".", r"\.")):
        load_worker_config(None, settings)


def test_worker_keys_as_kafka_names_them() -> None:
    config = load_worker_config(None, ["inter.worker.signature.algorithm=HmacSHA512",
                                       "inter.worker.verification.algorithms=HmacSHA256, HmacSHA512"])
    assert config.inter_worker_verification_algorithms == ["HmacSHA256", "HmacSHA512"]
    default = load_worker_config(None, [])
    assert (default.inter_worker_key_generation_algorithm, default.inter_worker_signature_algorithm,
            default.inter_worker_verification_algorithms, default.inter_worker_key_ttl_ms,
            default.inter_worker_key_size) == ("HmacSHA256", "HmacSHA256", ["HmacSHA256"], 3600000, None)


def test_a_task_class_other_than_the_connectors_fails_the_task_and_is_never_imported(tmp_path: Path) -> None:
    # A module that leaves a mark when imported, on sys.path: the worker must not import it.
    module = f"foreign_task_{uuid.uuid4().hex}"
    mark = tmp_path / "imported"
    (tmp_path / f"{module}.py").write_text(
        f"from pathlib import Path\nPath({str(mark)!r}).write_text('imported')\n"
        "from headwater.connectors.file.source import FileStreamSourceTask as Task\n")
    sys.path.insert(0, str(tmp_path))
    statuses: list[tuple[int | None, State, str | None]] = []
    worker = Worker("w", load_worker_config(None, ["bootstrap.servers=127.0.0.1:1"]), PluginRegistry(),
                    MemoryOffsetStore(), lambda c, t, s, trace: statuses.append((t, s, trace)))
    props = {"name": "c", "connector.class": "FileStreamSinkConnector", "tasks.max": "1", "topics": "t",
             "file": str(tmp_path / "out.txt")}
    try:
        started = asyncio.run(worker.start_task(TaskId("c", 0), props, {"task.class": f"{module}.Task"},
                                                TargetState.PAUSED))
    finally:
        sys.path.remove(str(tmp_path))
    assert started is False and not mark.exists() and module not in sys.modules
    (task, state, trace) = statuses[-1]
    assert (task, state) == (0, State.FAILED) and trace is not None
    assert f"Invalid value {module}.Task for configuration task.class" in trace, trace
    assert "headwater.connectors.file.sink.FileStreamSinkTask" in trace, trace
    # the connector's own task class, named, is what a task config carries
    own = {"task.class": "headwater.connectors.file.sink.FileStreamSinkTask"}
    assert worker.check_task_class("c", props, own).__name__ == "FileStreamSinkTask"
    with pytest.raises(ConfigErrors, match='Missing required configuration "task.class"'):
        worker.check_task_class("c", props, {})
