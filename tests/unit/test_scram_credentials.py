"""The SCRAM credential store (kept salted in the log directory, read back on start) and the ``--add-scram``
form of Kafka's kafka-storage.sh (KIP-900)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from headwater.broker.security.credentials import (
    CREDENTIALS_FILE,
    CredentialChange,
    ScramCredentialStore,
    parse_add_scram,
)
from headwater.broker.security.scram import MECHANISMS, ScramCredential

SHA512 = MECHANISMS["SCRAM-SHA-512"]


def test_store_keeps_credentials_across_reopen_without_secrets(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path)
    cred = ScramCredential.from_password(SHA512, "pw-of-alice", b"salt-of-alice", 8192)
    store.apply([CredentialChange("alice", SHA512, cred)])
    again = ScramCredentialStore(tmp_path)
    assert again.get("alice", SHA512) == cred and again.iterations("alice") == {"SCRAM-SHA-512": 8192}
    saved = json.loads((tmp_path / CREDENTIALS_FILE).read_text())
    assert set(saved["users"]["alice"]["SCRAM-SHA-512"]) == {"salt", "stored_key", "server_key", "iterations"}
    assert stat.S_IMODE((tmp_path / CREDENTIALS_FILE).stat().st_mode) == 0o600
    again.apply([CredentialChange("alice", SHA512, None)])
    assert ScramCredentialStore(tmp_path).users() == []


def test_unknown_mechanism_in_the_file_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / CREDENTIALS_FILE).write_text(json.dumps({"users": {"bob": {"SCRAM-SHA-1": {}}}}))
    with pytest.raises(ValueError, match="bob.*SCRAM-SHA-1"):
        ScramCredentialStore(tmp_path)


def test_bootstrap_sets_only_what_is_absent(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path)
    store.bootstrap([parse_add_scram("SCRAM-SHA-512=[name=admin,password=first]")])
    kept = store.get("admin", SHA512)
    store.bootstrap([parse_add_scram("SCRAM-SHA-512=[name=admin,password=second]"),
                     parse_add_scram("SCRAM-SHA-256=[name=admin,password=second]")])
    assert store.get("admin", SHA512) == kept and set(store.iterations("admin")) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}


def test_add_scram_form() -> None:
    change = parse_add_scram('SCRAM-SHA-512=[name=ops,password="a,b=c",iterations=8192]')
    assert (change.user, change.mechanism, change.credential is not None) == ("ops", SHA512, True)
    assert change.credential and change.credential.iterations == 8192
    assert change.credential == ScramCredential.from_password(SHA512, "a,b=c", change.credential.salt, 8192)


@pytest.mark.parametrize(("spec", "problem"), [
    ("SCRAM-SHA-1=[name=a,password=b]", "unknown mechanism SCRAM-SHA-1"),
    ("SCRAM-SHA-512=[name=a]", "password is missing"),
    ("SCRAM-SHA-512=[password=b]", "name is missing"),
    ("SCRAM-SHA-512=[name=a,password=b,saltedpassword=x]", "saltedpassword is not supported"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=20000]", "iterations must be 4096..16384"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=many]", "iterations=many is not a number"),
    ("admin:secret", "expected 'SCRAM-SHA-512=[name=...,password=...]'"),
])
def test_add_scram_refusals(spec: str, problem: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_add_scram(spec)
    assert problem in str(info.value) and "secret" not in str(info.value)
