"""AlterUserScramCredentials (key 51), v0 (KIP-554).

Behavior: deletes and sets users' SCRAM credentials. A set carries the salt, the iteration count and the
salted password the client computed; the broker keeps only the salt, the iterations, StoredKey and
ServerKey derived from it (the salted password is dropped here), persisted in the log directory (in a cluster
in ZooKeeper's ``/config/users/<user>``, for every broker) and used by SASL/SCRAM listeners from the next
authentication on. Each user is answered once, as Kafka's
controller answers: DUPLICATE_RESOURCE for a user altered twice in one request (deletions and
upsertions together), UNSUPPORTED_SASL_MECHANISM for a mechanism other than SCRAM-SHA-256 (1) or
SCRAM-SHA-512 (2), UNACCEPTABLE_CREDENTIAL for an empty name, iterations outside 4096..16384 or an empty
salt or salted password, RESOURCE_NOT_FOUND to delete a credential that does not exist. The valid
entries are applied together and saved once (in a cluster per user: one ZooKeeper could not take is answered
UNKNOWN_SERVER_ERROR with the reason). Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED
for every user).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..access.acls import AclOperation
from ..access.service import SharedStateUnavailable
from ..protocol.requests import AlterUserScramCredentialsRequest, ScramCredentialDeletion, ScramCredentialUpsertion
from ..security.credentials import CredentialChange, ScramCredentialStore
from ..security.scram import MAX_ITERATIONS, ScramCredential, ScramMechanism, mechanism_by_code
from .acl_wire import denied
from .registry import RequestContext, api

Problem = tuple[int, str]
DUPLICATE: Problem = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")


def _mechanism(name: str, code: int) -> ScramMechanism | Problem:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mechanism = mechanism_by_code(code)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {code}"
    return mechanism


def _deletion(store: ScramCredentialStore, d: ScramCredentialDeletion) -> CredentialChange | Problem:
    mechanism = _mechanism(d.name, d.mechanism)
    if isinstance(mechanism, tuple):
        return mechanism
    if not store.has(d.name, mechanism):
        return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
    return CredentialChange(d.name, mechanism, None)


def _upsertion(u: ScramCredentialUpsertion) -> CredentialChange | Problem:
    mechanism = _mechanism(u.name, u.mechanism)
    if isinstance(mechanism, tuple):
        return mechanism
    if u.iterations < mechanism.min_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if u.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not u.salt or not u.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    credential = ScramCredential.from_salted_password(mechanism, u.salted_password, u.salt, u.iterations)
    return CredentialChange(u.name, mechanism, credential)


@api(key=51, min=0, max=0)
async def handle(ctx: RequestContext, req: AlterUserScramCredentialsRequest) -> dict[str, Any]:
    refused = denied(ctx, AclOperation.ALTER)
    if refused:
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        return {"throttle_time_ms": 0, "results": [{"user": user, "error_code": refused[0],
                                                    "error_message": refused[1]} for user in users]}
    store = ctx.access.scram
    changes: dict[str, CredentialChange] = {}
    errors: dict[str, Problem] = {}
    checks: list[tuple[str, Callable[[], CredentialChange | Problem]]] = [
        *((d.name, partial(_deletion, store, d)) for d in req.deletions),
        *((u.name, partial(_upsertion, u)) for u in req.upsertions)]
    # as Kafka's ScramControlManager: a user already answered with an error is not looked at again
    for name, check in checks:
        if name in errors:
            continue
        if changes.pop(name, None) is not None:
            errors[name] = DUPLICATE
            continue
        outcome = check()
        if isinstance(outcome, tuple):
            errors[name] = outcome
        else:
            changes[name] = outcome
    failed: dict[str, str] = {}
    if changes:
        try:
            failed = await ctx.access.alter_scram(list(changes.values()))
        except SharedStateUnavailable as exc:
            failed = dict.fromkeys(changes, str(exc))
    results = [{"user": name, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR if name in failed else 0,
                "error_message": failed.get(name)} for name in changes]
    results += [{"user": name, "error_code": code, "error_message": text} for name, (code, text) in errors.items()]
    return {"throttle_time_ms": 0, "results": results}
