"""The contract between a SASL listener's connection loop and the mechanisms it offers.

The connection loop (SaslHandshake, then SaslAuthenticate frames, or raw tokens after a v0
handshake) knows nothing of PLAIN or SCRAM: it asks the listener's :class:`Mechanisms` for a
:class:`SaslServer` by name and feeds it the client's tokens until it is complete.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["AuthenticationFailed", "Mechanisms", "SaslServer"]


class AuthenticationFailed(Exception):
    """The client's credentials were refused. The message goes back to the client in
    SaslAuthenticate's error_message, so it must not reveal whether the user exists."""


class SaslServer(Protocol):
    """One authentication exchange on one connection (a new one per attempt or re-authentication)."""

    mechanism: str  # e.g. "PLAIN", "SCRAM-SHA-512"

    def step(self, token: bytes) -> bytes:
        """Consume the client's next token; return the server's answer (b"" when there is none).
        Raises AuthenticationFailed when the credentials are wrong or the token is malformed."""
        ...

    @property
    def complete(self) -> bool:
        """True once the exchange succeeded (after the step that returned the last answer)."""
        ...

    @property
    def principal(self) -> str:
        """The authenticated principal, e.g. ``User:alice``; only valid once complete."""
        ...


class Mechanisms(Protocol):
    """The SASL mechanisms one listener offers (its ``sasl.enabled.mechanisms``)."""

    def names(self) -> list[str]:
        """Enabled mechanism names in the listener's order (SaslHandshake's answer lists them)."""
        ...

    def server(self, mechanism: str) -> SaslServer:
        """A fresh exchange for ``mechanism`` (one of ``names()``)."""
        ...
