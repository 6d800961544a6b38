"""A cluster's ACLs, SCRAM credentials and client quotas, shared by every broker through ZooKeeper in Kafka's
layout: what CreateAcls, AlterUserScramCredentials or AlterClientQuotas change through one broker holds on all.

- ACLs: acl_store_zk.py (``/kafka-acl``, ``/kafka-acl-extended`` and their change notifications).
- SCRAM credentials: in the user's entity config ``/config/users/<user>`` (user names sanitized as Kafka's
  Sanitizer does), one key per mechanism in ScramCredentialUtils' form: ``{"version":1,"config":
  {"SCRAM-SHA-256":"salt=..,stored_key=..,server_key=..,iterations=4096"}}``.
- Client quotas: the keys ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
  ``controller_mutation_rate`` in ``/config/users/<user>``, ``/config/users/<user>/clients/<client id>``,
  ``/config/clients/<client id>`` (``<default>`` for a default entity), ``connection_creation_rate`` in
  ``/config/ips/<ip>``; values as Kafka's ZkAdminManager writes them (``"1024.0"``).

Credentials and quotas of a user share its znode, so every change is a read-modify-write conditional on the
znode's version (retried when another broker wrote first), written with its ``/config/changes`` notification
(config_changes.py); every broker's ConfigChanges hands the entity's whole config to the handlers here, which
set the broker's stores (the ones SASL/SCRAM and the throttlers read). The writing broker applies what it wrote
at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from typing import TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclBinding, AclFilter, AclStore
from ..access.quotas import CLIENT_ID, IP, QUOTA_KEYS, USER, Entity, QuotaStore, entity
from ..access.service import SharedStateUnavailable
from ..security.credentials import CredentialChange, ScramCredentialStore, credential_text, parse_credential_text
from ..security.scram import MECHANISMS, ScramCredential
from .acl_store_zk import ZkAcls
from .config_changes import ConfigChanges, desanitize, read_entity_config, sanitize, write_entity_config
from .znodes import DEFAULT_ENTITY

__all__ = ["ClusterSecurity", "entity_znode", "znode_entity"]

log = logging.getLogger(__name__)

USERS, CLIENTS, IPS = "users", "clients", "ips"  # Kafka's ConfigType names
MAX_UPDATE_RETRIES = 10
Config = dict[str, str]
ConfigChange = Callable[[Config], Config]


def _name(value: str | None, sanitized: bool = True) -> str:
    if value is None:
        return DEFAULT_ENTITY
    return sanitize(value) if sanitized else value


def _value(name: str) -> str | None:
    return None if name == DEFAULT_ENTITY else desanitize(name)


def entity_znode(ent: Entity) -> tuple[str, str]:
    """(entity type, name) of the config znode a quota entity lives in (``/config/<type>/<name>``)."""
    parts = dict(ent)
    if IP in parts:
        return IPS, _name(parts[IP], sanitized=False)  # Kafka keeps IPs as they are
    if USER in parts and CLIENT_ID in parts:
        return USERS, f"{_name(parts[USER])}/clients/{_name(parts[CLIENT_ID])}"
    if USER in parts:
        return USERS, _name(parts[USER])
    return CLIENTS, _name(parts[CLIENT_ID])


def znode_entity(entity_type: str, name: str) -> Entity:
    """The quota entity of a config znode (the inverse of ``entity_znode``)."""
    if entity_type == IPS:
        return entity([(IP, None if name == DEFAULT_ENTITY else name)])
    if entity_type == CLIENTS:
        return entity([(CLIENT_ID, _value(name))])
    user, sep, client = name.partition("/clients/")
    if sep:
        return entity([(USER, _value(user)), (CLIENT_ID, _value(client))])
    return entity([(USER, _value(user))])


_Value = TypeVar("_Value")


def _read_keys(where: str, config: Config, keys: Collection[str], parse: Callable[[str], _Value]) -> dict[str, _Value]:
    """The config's values of ``keys``, parsed; one that cannot be parsed is logged (never its text: it may be a
    credential) and left out."""
    found: dict[str, _Value] = {}
    for key, text in config.items():
        if key in keys:
            try:
                found[key] = parse(text)
            except ValueError as exc:
                log.error("%s: %s not applied: %s", where, key, exc)
    return found


def quota_values(where: str, config: Config) -> dict[str, float]:
    """The quota keys of an entity config (numbers)."""
    return _read_keys(where, config, QUOTA_KEYS, float)


def scram_credentials(where: str, config: Config) -> dict[str, ScramCredential]:
    """The SCRAM credentials of a user's config, by mechanism."""
    return _read_keys(where, config, MECHANISMS, parse_credential_text)


def _set_quotas(ops: dict[str, float | None]) -> ConfigChange:
    def change(config: Config) -> Config:
        new = dict(config)
        for key, value in ops.items():
            if value is None:
                new.pop(key, None)
            else:
                new[key] = repr(float(value))
        return new
    return change


def _set_credentials(changes: list[CredentialChange], only_absent: bool) -> ConfigChange:
    def change(config: Config) -> Config:
        new = dict(config)
        for ch in changes:
            if only_absent and ch.mechanism.name in config:
                log.info("%s credential of user %r already set: kept (--add-scram)", ch.mechanism.name, ch.user)
            elif ch.credential is None:
                new.pop(ch.mechanism.name, None)
            else:
                new[ch.mechanism.name] = credential_text(ch.credential)
        return new
    return change


class ClusterSecurity:
    """The broker's ACL, quota and credential stores kept from ZooKeeper, and the changes written there
    (access/service.py's SharedSecurityState)."""

    def __init__(self, zk: KazooClient, changes: ConfigChanges, acls: AclStore, quotas: QuotaStore,
                 scram: ScramCredentialStore) -> None:
        self.zk, self.changes = zk, changes
        self.acls = ZkAcls(zk, acls)
        self.quotas, self.scram = quotas, scram
        self._writing = asyncio.Lock()  # this broker's config writes one after the other

    async def start(self) -> None:
        """Read the ACLs and every user, client and ip config; from then on follow their changes."""
        await self.acls.start()
        for entity_type in (USERS, CLIENTS, IPS):  # each handed every existing entity now
            self.changes.handle(entity_type, self._handler(entity_type))

    async def stop(self) -> None:
        await self.acls.stop()

    # -- ACLs -------------------------------------------------------------------------------------------

    async def create_acls(self, bindings: list[AclBinding]) -> dict[AclBinding, tuple[int, str]]:
        failed: dict[AclBinding, tuple[int, str]] = {}
        storable = []
        for b in bindings:
            if "/" in b.resource_name:  # a znode name: Kafka's AclAuthorizer refuses it the same way
                problem = f"ACL binding contains invalid resource name: {b.resource_name}"
                failed[b] = (ErrorCode.INVALID_REQUEST, problem)
            else:
                storable.append(b)
        if storable:
            failed.update({b: (ErrorCode.UNKNOWN_SERVER_ERROR, why)
                           for b, why in (await self.acls.create(storable)).items()})
        return failed

    async def delete_acls(self, filters: list[AclFilter]
                          ) -> tuple[list[list[AclBinding]], dict[AclBinding, tuple[int, str]]]:
        removed, failed = await self.acls.delete(filters)
        return removed, {b: (ErrorCode.UNKNOWN_SERVER_ERROR, why) for b, why in failed.items()}

    # -- quotas and credentials ------------------------------------------------------------------------

    async def alter_quotas(self, changes: list[tuple[Entity, dict[str, float | None]]]) -> dict[Entity, str]:
        merged: dict[Entity, dict[str, float | None]] = {}  # one entity in two entries: both applied, in order
        for ent, ops in changes:
            merged.setdefault(ent, {}).update(ops)
        znodes = {ent: entity_znode(ent) for ent in merged}
        failed = await self._alter({znodes[ent]: _set_quotas(ops) for ent, ops in merged.items()})
        return {ent: failed[znode] for ent, znode in znodes.items() if znode in failed}

    async def alter_scram(self, changes: list[CredentialChange], only_absent: bool = False) -> dict[str, str]:
        """``only_absent``: each credential set only if its user has none for that mechanism yet (--add-scram,
        written once as Kafka's ``format --add-scram``; a password changed since stays)."""
        by_user: dict[str, list[CredentialChange]] = {}
        for ch in changes:
            by_user.setdefault(ch.user, []).append(ch)
        failed = await self._alter({(USERS, sanitize(user)): _set_credentials(chs, only_absent)
                                    for user, chs in by_user.items()})
        return {user: failed[(USERS, sanitize(user))] for user in by_user if (USERS, sanitize(user)) in failed}

    async def _alter(self, changes: dict[tuple[str, str], ConfigChange]) -> dict[tuple[str, str], str]:
        """Write each entity's changed config (with its notification), then apply it here at once; the entities
        that could not be written, with why (the others are written)."""
        failed: dict[tuple[str, str], str] = {}
        async with self._writing:
            for (entity_type, name), change in changes.items():
                try:
                    config = await asyncio.to_thread(self._write, entity_type, name, change)
                except Exception as exc:  # kazoo's connection loss, timeouts: the entity answers with the reason
                    log.error("writing /config/%s/%s failed: %s", entity_type, name, exc)
                    failed[(entity_type, name)] = str(exc) if isinstance(exc, SharedStateUnavailable) else \
                        f"Failed to update /config/{entity_type}/{name}: {exc}"
                    continue
                self._handler(entity_type)(name, config)
        return failed

    def _write(self, entity_type: str, name: str, change: ConfigChange) -> Config:
        """The read-modify-write of one entity config, conditional on its version (worker thread)."""
        for _ in range(MAX_UPDATE_RETRIES):
            config, version = read_entity_config(self.zk, entity_type, name)
            new = change(config)
            if new == config:
                return config
            try:
                write_entity_config(self.zk, entity_type, name, new, expected_version=version)
            except BadVersionError:
                continue  # another broker wrote first: read again
            log.info("updated /config/%s/%s", entity_type, name)
            return new
        raise SharedStateUnavailable(f"Failed to update /config/{entity_type}/{name} after trying a maximum of "
                                     f"{MAX_UPDATE_RETRIES} times")

    def _handler(self, entity_type: str) -> Callable[[str, Config], None]:
        def apply(name: str, config: Config) -> None:
            """An entity's whole config (event loop): its quotas, and a user's SCRAM credentials."""
            where = f"/config/{entity_type}/{name}"
            ent = znode_entity(entity_type, name)
            self.quotas.put(ent, quota_values(where, config))
            user = dict(ent).get(USER)
            if entity_type == USERS and len(ent) == 1 and user is not None:
                self.scram.put_user(user, scram_credentials(where, config))
        return apply
