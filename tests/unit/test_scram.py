"""SCRAM-SHA-256/512 server side: RFC 7677's test vector, a full SHA-512 exchange with a client written
from RFC 5802, and the ways an exchange fails without telling whether the user exists."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable

import pytest

from headwater.broker.security.mechanism import AuthenticationFailed
from headwater.broker.security.scram import (
    MECHANISMS,
    ScramCredential,
    ScramMechanism,
    ScramServer,
)

SHA256, SHA512 = MECHANISMS["SCRAM-SHA-256"], MECHANISMS["SCRAM-SHA-512"]
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism"

# RFC 7677 section 3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SNONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def server(mech: ScramMechanism, users: dict[str, ScramCredential], nonce: str | None = None) -> ScramServer:
    decoy = b"k" * 32
    lookup = lambda user, m: users.get(user) if m is mech else None  # noqa: E731
    if nonce is None:
        return ScramServer(mech, lookup, decoy)
    return ScramServer(mech, lookup, decoy, new_nonce=lambda: nonce)


def test_rfc7677_sha256_vector() -> None:
    s = server(SHA256, {"user": ScramCredential.from_password(SHA256, "pencil", RFC_SALT, 4096)}, RFC_SNONCE)
    assert s.step(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not s.complete
    assert s.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert s.complete and s.principal == "User:user"


def test_rfc7677_vector_with_another_password_fails() -> None:
    s = server(SHA256, {"user": ScramCredential.from_password(SHA256, "pencil2", RFC_SALT, 4096)}, RFC_SNONCE)
    s.step(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed, match=GENERIC):
        s.step(RFC_CLIENT_FINAL)
    assert not s.complete and s.failure == "wrong client proof"


class Client:
    """RFC 5802's client, written from the RFC (not from the server module)."""

    def __init__(self, mech: ScramMechanism, user: str, password: str, gs2: str = "n,,") -> None:
        self.mech, self.password, self.gs2 = mech, password, gs2
        self.cnonce = secrets.token_urlsafe(18)
        escaped = user.replace("=", "=3D").replace(",", "=2C")
        self.first_bare = f"n={escaped},r={self.cnonce}"

    def first(self) -> bytes:
        return (self.gs2 + self.first_bare).encode()

    def final(self, server_first: bytes, proof_for: str | None = None, nonce_prefix: str = "") -> bytes:
        attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
        assert attrs["r"].startswith(self.cnonce)
        attrs["r"] = nonce_prefix + attrs["r"]
        salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
        h = self.mech.hash_name
        salted = hashlib.pbkdf2_hmac(h, (proof_for or self.password).encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", h)
        stored_key = hashlib.new(h, client_key).digest()
        without_proof = f"c={base64.b64encode(self.gs2.encode()).decode()},r={attrs['r']}"
        auth = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth, h)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.expected_v = base64.b64encode(hmac.digest(hmac.digest(salted, b"Server Key", h), auth, h))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("mech", [SHA256, SHA512], ids=lambda m: m.name)
def test_round_trip(mech: ScramMechanism) -> None:
    users = {"alice": ScramCredential.from_password(mech, "alice-secret", secrets.token_bytes(16), 4096)}
    s, c = server(mech, users), Client(mech, "alice", "alice-secret")
    server_first = s.step(c.first())
    answer = s.step(c.final(server_first))
    assert answer == b"v=" + c.expected_v
    assert s.complete and s.principal == "User:alice"
    with pytest.raises(AuthenticationFailed):  # nothing more once complete
        s.step(b"c=biws")


def test_librdkafka_before_2_6_1_doubled_client_nonce() -> None:
    """librdkafka < 2.6.1 (Debian's kcat) sends its nonce again before the server's; accepted as Kafka 3.9
    accepts it, and only that: another prefix is refused."""
    users = {"alice": ScramCredential.from_password(SHA512, "pw", b"salt", 4096)}
    s, c = server(SHA512, users), Client(SHA512, "alice", "pw")
    assert s.step(c.final(s.step(c.first()), nonce_prefix=c.cnonce)) == b"v=" + c.expected_v
    s, c = server(SHA512, users), Client(SHA512, "alice", "pw")
    with pytest.raises(AuthenticationFailed, match=GENERIC):
        s.step(c.final(s.step(c.first()), nonce_prefix="x" + c.cnonce))
    assert s.failure == "Invalid client nonce in the final client message."


def test_escaped_user_name_and_authzid() -> None:
    name = "a,b=c"
    users = {name: ScramCredential.from_password(SHA512, "pw", b"salt-salt", 4096)}
    s = server(SHA512, users)
    c = Client(SHA512, name, "pw", gs2="n,a=a=2Cb=3Dc,")
    assert c.first().startswith(b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=")
    assert s.step(c.final(s.step(c.first()))) == b"v=" + c.expected_v
    assert s.principal == "User:a,b=c"


def test_authzid_other_than_user_is_refused() -> None:
    users = {"alice": ScramCredential.from_password(SHA512, "pw", b"salt", 4096)}
    s = server(SHA512, users)
    with pytest.raises(AuthenticationFailed, match="authorization id that is different from username"):
        s.step(b"n,a=bob,n=alice,r=abc")


def test_delegation_tokens_are_refused_clearly() -> None:
    s = server(SHA512, {})
    with pytest.raises(AuthenticationFailed, match="delegation tokens are not supported"):
        s.step(b"n,,n=tokenid,r=abc,tokenauth=true")


def test_unknown_user_fails_at_the_proof_like_a_wrong_password() -> None:
    users = {"alice": ScramCredential.from_password(SHA512, "pw", secrets.token_bytes(32), 4096)}
    known, unknown = server(SHA512, users), server(SHA512, users)
    c_known, c_unknown = Client(SHA512, "alice", "wrong"), Client(SHA512, "mallory", "pw")
    first_known, first_unknown = known.step(c_known.first()), unknown.step(c_unknown.first())
    # both first answers have the same shape: a 32-byte salt and Kafka's minimum iterations
    shape = lambda b: [(a[:2], len(a)) for a in b.split(b",")[1:]]  # noqa: E731
    assert shape(first_known) == shape(first_unknown)
    errors = []
    for s, c, first in ((known, c_known, first_known), (unknown, c_unknown, first_unknown)):
        with pytest.raises(AuthenticationFailed) as info:
            s.step(c.final(first))
        errors.append(str(info.value))
    assert errors[0] == errors[1] and errors[0].startswith(GENERIC)
    assert (known.failure, unknown.failure) == ("wrong client proof", "no SCRAM-SHA-512 credential for the user")
    # the decoy salt is stable for a user, as a real one is
    again = server(SHA512, users)
    assert again.step(Client(SHA512, "mallory", "x").first()).split(b",")[1] == first_unknown.split(b",")[1]


@pytest.mark.parametrize("token", [
    b"y,,n=alice,r=abc",            # channel binding asked for
    b"n,,m=ext,n=alice,r=abc",      # a mandatory extension
    b"n,,n=al=ice,r=abc",           # bad escaping
    b"n,,n=a=3=2CD,r=abc",          # an escape inside another
    b"n,,r=abc,n=alice",            # attributes out of order
    b"n,,n=alice",                  # no nonce
    b"n,,n=,r=abc",                 # empty user
    b"\xff\xfe",                    # not UTF-8
])
def test_malformed_client_first(token: bytes) -> None:
    s = server(SHA512, {"alice": ScramCredential.from_password(SHA512, "pw", b"salt", 4096)})
    with pytest.raises(AuthenticationFailed, match=GENERIC):
        s.step(token)
    assert s.failure


@pytest.mark.parametrize("mangle", [
    lambda f: f.replace(b"c=biws", b"c=eSws"),                       # another gs2 header
    lambda f: f.replace(b",r=", b",r=x"),                            # another nonce
    lambda f: f.rsplit(b",p=", 1)[0],                                # no proof
    lambda f: f.rsplit(b",p=", 1)[0] + b",p=AAAA",                   # proof of the wrong length
    lambda f: f.rsplit(b",p=", 1)[0] + b",p=***",                    # proof not base64
])
def test_malformed_client_final(mangle: Callable[[bytes], bytes]) -> None:
    s = server(SHA512, {"alice": ScramCredential.from_password(SHA512, "pw", b"salt", 4096)})
    c = Client(SHA512, "alice", "pw")
    final = c.final(s.step(c.first()))
    with pytest.raises(AuthenticationFailed, match=GENERIC):
        s.step(mangle(final))
    assert not s.complete
    with pytest.raises(AuthenticationFailed):  # a failed exchange stays failed
        s.step(final)


def test_credential_repr_hides_keys() -> None:
    c = ScramCredential.from_password(SHA512, "pw", b"salt", 4096)
    assert "salt'" not in repr(c) and c.stored_key.hex() not in repr(c) and "hidden" in repr(c)
