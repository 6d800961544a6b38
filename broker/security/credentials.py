"""The broker's SCRAM credentials (KIP-554), kept in ``headwater-scram-credentials.json`` in the log directory (a
cluster's in ZooKeeper's ``/config/users/<user>``, in Kafka's ``credential_text`` form: broker/cluster/).

Only the salted credential is kept per user and mechanism (salt, iterations, StoredKey, ServerKey, as
Kafka's UserScramCredentialRecord): neither the password nor the salted password AlterUserScramCredentials
carries. The file is replaced atomically on each change and readable by the broker's user alone, since
its keys let one pose as the broker to a client (ServerKey). Nothing of a credential is logged.
"""

from __future__ import annotations

import base64
import logging
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..config.state_file import read_json, write_json
from .scram import MAX_ITERATIONS, MECHANISMS, ScramCredential, ScramMechanism, ScramServer

__all__ = ["CREDENTIALS_FILE", "CredentialChange", "ScramCredentialStore", "credential_text", "parse_add_scram",
           "parse_credential_text"]

log = logging.getLogger(__name__)

CREDENTIALS_FILE = "headwater-scram-credentials.json"


@dataclass(frozen=True, slots=True)
class CredentialChange:
    """One user's change: a credential to set for a mechanism, or None to delete that mechanism's."""

    user: str
    mechanism: ScramMechanism
    credential: ScramCredential | None


_ADD_SCRAM = re.compile(r"(?P<mechanism>[A-Z0-9-]+)=\[(?P<body>.*)\]", re.DOTALL)
_PAIR = re.compile(r'\s*(?P<key>[a-z]+)=(?:"(?P<quoted>[^"]*)"|(?P<bare>[^,]*))\s*(?:,|$)')


def parse_add_scram(spec: str) -> CredentialChange:
    """A credential as Kafka's ``kafka-storage.sh format --add-scram`` writes it (KIP-900):
    ``SCRAM-SHA-512=[name=admin,password=admin-secret]``, with ``iterations=8192`` optionally (default 4096)
    and a value in double quotes when it holds a comma. A ValueError naming what is wrong otherwise."""
    m = _ADD_SCRAM.fullmatch(spec.strip())
    if not m:
        raise ValueError("--add-scram: expected 'SCRAM-SHA-512=[name=...,password=...]'")
    mechanism = MECHANISMS.get(m.group("mechanism"))
    if mechanism is None:
        raise ValueError(f"--add-scram: unknown mechanism {m.group('mechanism')} (use {' or '.join(MECHANISMS)})")
    values: dict[str, str] = {}
    body, pos = m.group("body"), 0
    while pos < len(body):
        pair = _PAIR.match(body, pos)
        if not pair or pair.end() == pos:
            raise ValueError(f"--add-scram {mechanism.name}: cannot read {body[pos:pos + 10]!r}... (key=value pairs)")
        key = pair.group("key")
        if key not in ("name", "password", "iterations"):
            raise ValueError(f"--add-scram {mechanism.name}: {key} is not supported (name, password, iterations)")
        values[key] = pair.group("quoted") if pair.group("quoted") is not None else pair.group("bare")
        pos = pair.end()
    for key in ("name", "password"):
        if not values.get(key):
            raise ValueError(f"--add-scram {mechanism.name}: {key} is missing")
    try:
        iterations = int(values.get("iterations", mechanism.min_iterations))
    except ValueError:
        raise ValueError(f"--add-scram {mechanism.name}: iterations={values['iterations']} is not a number") from None
    if not mechanism.min_iterations <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"--add-scram {mechanism.name}: iterations must be "
                         f"{mechanism.min_iterations}..{MAX_ITERATIONS}")
    credential = ScramCredential.from_password(mechanism, values["password"], secrets.token_bytes(32), iterations)
    return CredentialChange(values["name"], mechanism, credential)


def credential_text(c: ScramCredential) -> str:
    """Kafka's ScramCredentialUtils.credentialToString, the form /config/users/<user> holds:
    ``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>``."""
    return ",".join(f"{k}={v}" for k, v in _to_json(c).items())


def parse_credential_text(text: str) -> ScramCredential:
    """ScramCredentialUtils.credentialFromString; ValueError naming what is missing or wrong."""
    fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    missing = [k for k in ("salt", "stored_key", "server_key", "iterations") if k not in fields]
    if missing:
        raise ValueError(f"a SCRAM credential without {', '.join(missing)}")
    try:
        return _from_json(dict(fields))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"an unreadable SCRAM credential: {exc}") from None


def _to_json(c: ScramCredential) -> dict[str, object]:
    enc = base64.b64encode
    return {"salt": enc(c.salt).decode(), "stored_key": enc(c.stored_key).decode(),
            "server_key": enc(c.server_key).decode(), "iterations": c.iterations}


def _from_json(data: dict[str, object]) -> ScramCredential:
    dec = base64.b64decode
    return ScramCredential(dec(str(data["salt"])), dec(str(data["stored_key"])), dec(str(data["server_key"])),
                           int(str(data["iterations"])))


class ScramCredentialStore:
    def __init__(self, log_dir: Path, local: bool = True) -> None:
        """``local``: the credentials are this file's; otherwise (a cluster) they are set from ZooKeeper
        (``put_user``) and the file's, from single-node use, are not used (logged)."""
        self.path = log_dir / CREDENTIALS_FILE
        self.local = local
        # user -> mechanism name -> credential
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._decoy_key = secrets.token_bytes(32)  # salts shown for users without a credential
        saved = (read_json(self.path) or {}).get("users", {})
        if saved and not local:
            log.warning("SCRAM credentials of %d users in %s (from single-node use) are not used: a cluster's "
                        "credentials are in ZooKeeper", len(saved), self.path)
            saved = {}
        for user, mechs in saved.items():
            for name, data in mechs.items():
                if name not in MECHANISMS:
                    raise ValueError(f"{self.path}: user {user!r} has a credential for unknown mechanism {name!r}")
                self._users.setdefault(user, {})[name] = _from_json(data)
        if self._users:
            log.info("loaded SCRAM credentials of %d users from %s", len(self._users), self.path)

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism.name)

    def has(self, user: str, mechanism: ScramMechanism) -> bool:
        return self.get(user, mechanism) is not None

    def users(self) -> list[str]:
        return sorted(self._users)

    def iterations(self, user: str) -> dict[str, int]:
        """Mechanism name -> iteration count of each credential the user has (empty: none)."""
        return {name: c.iterations for name, c in sorted(self._users.get(user, {}).items())}

    def put_user(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        """Set a user's whole credentials by mechanism name (none: the user has none), as a cluster's ZooKeeper
        says; nothing persisted."""
        users = dict(self._users)  # replaced whole: an exchange reading meanwhile sees the old or the new
        if credentials:
            users[user] = dict(credentials)
        else:
            users.pop(user, None)
        self._users = users

    def apply(self, changes: Iterable[CredentialChange]) -> None:
        """Apply every change, then save once (all or nothing on disk)."""
        assert self.local, "a cluster's SCRAM credentials are written to ZooKeeper, not to the local file"
        users = {u: dict(m) for u, m in self._users.items()}
        for ch in changes:
            mechs = users.setdefault(ch.user, {})
            if ch.credential is None:
                mechs.pop(ch.mechanism.name, None)
            else:
                mechs[ch.mechanism.name] = ch.credential
            if not mechs:
                del users[ch.user]
        write_json(self.path, {"users": {u: {n: _to_json(c) for n, c in m.items()} for u, m in users.items()}},
                   mode=0o600)
        self._users = users

    def bootstrap(self, changes: Iterable[CredentialChange]) -> None:
        """Credentials given at start-up (``headwater broker --add-scram``): each set only if its user has no
        credential for that mechanism yet, as Kafka's ``format --add-scram`` writes them once; a password
        changed since through AlterUserScramCredentials stays."""
        new = [ch for ch in changes if not self.has(ch.user, ch.mechanism)]
        for ch in changes:
            log.info("%s credential of user %r %s (--add-scram)", ch.mechanism.name, ch.user,
                     "added" if ch in new else "already set: kept")
        if new:
            self.apply(new)

    def server(self, mechanism: str) -> ScramServer:
        """A fresh SCRAM exchange for ``mechanism`` (``SCRAM-SHA-256`` or ``SCRAM-SHA-512``) against these
        credentials; what a SASL listener's mechanism registry hands its connection loop."""
        return ScramServer(MECHANISMS[mechanism], self.get, self._decoy_key)
