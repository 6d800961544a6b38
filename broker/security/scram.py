"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, as Kafka speaks them.

The exchange: client-first ``n,[a=authzid],n=user,r=cnonce[,ext=...]``; server-first
``r=cnonce+snonce,s=<b64 salt>,i=<iterations>``; client-final ``c=<b64 gs2 header>,r=<nonce>,p=<b64 proof>``;
server-final ``v=<b64 ServerSignature>``. The server keeps only a salted credential per user and
mechanism (salt, iterations, StoredKey, ServerKey), never the password nor the salted password.

A user with no credential goes through the same exchange against a decoy credential (its salt derived from
the user name with a key of this process, Kafka's minimum iterations) and fails at the proof, as a wrong
password does: an attacker cannot tell from the exchange whether a user exists. Kafka answers both with
SASL_AUTHENTICATION_FAILED; its own server fails an unknown user already at the first message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto

from .mechanism import AuthenticationFailed

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "mechanism_by_code",
    "salted_password",
]

log = logging.getLogger(__name__)

MAX_ITERATIONS = 16384  # Kafka's ScramControlManager.MAX_ITERATIONS, checked on AlterUserScramCredentials


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str  # the SASL mechanism name
    hash_name: str  # hashlib's name of its hash
    code: int  # the int8 KIP-554 uses on the wire (0 is UNKNOWN)
    min_iterations: int = 4096  # Kafka's minimum for both mechanisms

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.digest(key, data, self.hash_name)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


def mechanism_by_code(code: int) -> ScramMechanism | None:
    return next((m for m in MECHANISMS.values() if m.code == code), None)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps for one user and mechanism (RFC 5802 section 3)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never print the keys
        return f"ScramCredential(iterations={self.iterations}, salt=[hidden], stored_key=[hidden], server_key=[hidden])"

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salted: bytes, salt: bytes,
                             iterations: int) -> ScramCredential:
        """The credential of a salted password (what AlterUserScramCredentials carries)."""
        client_key = mechanism.hmac(salted, b"Client Key")
        return cls(salt, mechanism.hash(client_key), mechanism.hmac(salted, b"Server Key"), iterations)

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> ScramCredential:
        return cls.from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations), salt,
                                        iterations)


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC of the mechanism's hash (no SASLprep, as Kafka)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise _Refused(f"{what} is not base64") from None


_SASLNAME = re.compile(r"(?:[^=,]|=2C|=3D)*")
_ESCAPES = re.compile(r"=2C|=3D")


def _saslname(text: str) -> str:
    """RFC 5802's saslname unescaped: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is malformed."""
    if not _SASLNAME.fullmatch(text):
        raise _Refused("bad saslname escaping")
    return _ESCAPES.sub(lambda m: "," if m.group() == "=2C" else "=", text)


def _base36(n: int) -> str:
    """Kafka's server nonce: 130 random bits in base 36."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, d = divmod(n, 36)
        out = digits[d] + out
    return out or "0"


class _Refused(Exception):
    """Why an exchange fails: a message that does not parse, a wrong proof, no such user. The reason stays
    in the server (``ScramServer.failure``); the client gets Kafka's one generic text."""


def _attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.isalpha():
            raise _Refused(f"bad attribute {part[:20]!r}")
        out.append((key, value))
    return out


class _State(Enum):
    FIRST = auto()
    FINAL = auto()
    COMPLETE = auto()
    FAILED = auto()


#: Looks up the stored credential of a user for a mechanism (None: no such credential)
CredentialLookup = Callable[[str, ScramMechanism], "ScramCredential | None"]


class ScramServer:
    """One SCRAM exchange on one connection (:class:`~.mechanism.SaslServer`)."""

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup, decoy_key: bytes,
                 new_nonce: Callable[[], str] = lambda: _base36(secrets.randbits(130))) -> None:
        self.mechanism = mechanism.name
        self._new_nonce = new_nonce  # the server's part of the nonce (fixed only by the RFC's test vectors)
        self._mech = mechanism
        self._lookup = lookup
        self._decoy_key = decoy_key
        self._state = _State.FIRST
        self._user = ""
        self._credential: ScramCredential | None = None
        self._known = False  # whether the user has a credential (else the exchange runs against a decoy)
        self._gs2_header = ""
        self._cnonce = self._nonce = ""
        self._auth_prefix = ""  # client-first-bare "," server-first "," (the start of AuthMessage)
        self.failure = ""  # why the exchange failed, for the server's log (never sent to the client)

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def principal(self) -> str:
        if not self.complete:
            raise RuntimeError("SCRAM exchange not complete")
        return f"User:{self._user}"

    def _generic(self) -> AuthenticationFailed:
        # Kafka's text for a SaslException: the same whatever went wrong
        return AuthenticationFailed("Authentication failed during authentication due to invalid credentials with "
                                    f"SASL mechanism {self.mechanism}")

    def step(self, token: bytes) -> bytes:
        try:
            if self._state is _State.FIRST:
                return self._client_first(token)
            if self._state is _State.FINAL:
                return self._client_final(token)
            raise _Refused(f"unexpected token in state {self._state.name}")
        except _Refused as exc:
            self._fail(str(exc))
            raise self._generic() from None
        except AuthenticationFailed as exc:
            self._fail(str(exc))
            raise

    def _fail(self, reason: str) -> None:
        log.info("%s authentication of user %r failed: %s", self.mechanism, self._user, reason)
        self.failure = reason
        self._state = _State.FAILED
        self._credential = None

    def _client_first(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise _Refused("client-first message is not UTF-8") from None
        cbind, sep, rest = text.partition(",")
        if not sep or cbind != "n":
            raise _Refused("only gs2 channel-binding flag 'n' is supported")
        authz, sep, bare = rest.partition(",")
        if not sep or authz and not authz.startswith("a="):
            raise _Refused("bad gs2 header")
        authzid = _saslname(authz[2:]) if authz else ""
        attrs = _attributes(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            # a leading "m=" (a mandatory extension) is refused here too, as RFC 5802 asks
            raise _Refused("client-first message must start n=<user>,r=<nonce>")
        user, cnonce = _saslname(attrs[0][1]), attrs[1][1]
        if not cnonce or not all(0x21 <= ord(c) <= 0x7E for c in cnonce):
            raise _Refused("bad client nonce")
        extensions = dict(attrs[2:])
        if extensions.get("tokenauth", "").lower() == "true":
            raise AuthenticationFailed("Authentication failed: delegation tokens are not supported by this broker")
        if not user:
            raise _Refused("empty user name")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self._user = user
        credential = self._lookup(user, self._mech)
        if credential is not None and credential.iterations < self._mech.min_iterations:
            credential = None  # as Kafka: stored below the minimum = cannot log in
        self._known = credential is not None
        self._credential = credential = credential or self._decoy(user)
        salt, iterations = credential.salt, credential.iterations
        self._gs2_header = f"{cbind},{authz},"
        self._cnonce, self._nonce = cnonce, cnonce + self._new_nonce()
        server_first = f"r={self._nonce},s={_b64(salt)},i={iterations}"
        self._auth_prefix = f"{bare},{server_first},"
        self._state = _State.FINAL
        return server_first.encode("ascii")

    def _decoy(self, user: str) -> ScramCredential:
        """The credential a user without one is checked against: keys no password gives, and a salt stable
        per user, so that asking twice does not tell a decoy (fresh each time) from a real one."""
        def part(label: str) -> bytes:
            return hmac.digest(self._decoy_key, f"{label}\0{self._mech.name}\0{user}".encode(), self._mech.hash_name)

        return ScramCredential(part("salt")[:32], part("stored"), part("server"), self._mech.min_iterations)

    def _client_final(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise _Refused("client-final message is not UTF-8") from None
        without_proof, sep, proof_attr = text.rpartition(",")
        if not sep or not proof_attr.startswith("p="):
            raise _Refused("client-final message must end with p=<proof>")
        attrs = _attributes(without_proof)
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise _Refused("client-final message must start c=<binding>,r=<nonce>")
        if _unb64(attrs[0][1], "channel binding") != self._gs2_header.encode("utf-8"):
            raise _Refused("channel binding does not match the gs2 header")
        # librdkafka before 2.6.1 (kcat, many distributions' packages) sends its own nonce again in front of
        # the server's; Kafka 3.8.1-3.9 accept a nonce that ends with the server's, as here, Kafka 4 does not.
        if attrs[1][1] not in (self._nonce, self._cnonce + self._nonce):
            raise _Refused("Invalid client nonce in the final client message.")
        proof = _unb64(proof_attr[2:], "client proof")
        auth_message = (self._auth_prefix + without_proof).encode("utf-8")
        credential, mech = self._credential, self._mech
        assert credential is not None  # set by the first message
        if len(proof) != mech.digest_size:
            raise _Refused("client proof has the wrong length")
        signature = mech.hmac(credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        # an unknown user goes through the same steps against the decoy and fails here, as a wrong password does
        if not hmac.compare_digest(mech.hash(client_key), credential.stored_key) or not self._known:
            raise _Refused("wrong client proof" if self._known else f"no {mech.name} credential for the user")
        server_signature = mech.hmac(credential.server_key, auth_message)
        self._credential = None
        self._state = _State.COMPLETE
        return f"v={_b64(server_signature)}".encode("ascii")
