"""Connection settings as libpq takes them, from the keys users copy: Debezium's ``database.*`` (the source)
and a JDBC URL's query with Confluent's and Debezium's ``connection.*`` keys (the sink).

One place checks the TLS settings (the sslmode, the certificate and key files), decides which other keys go
to libpq unchanged, and says what a refused connection means. Errors read ``<key>: <problem>``, so the
config validation files them under the key the user wrote.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from psycopg import pq

from headwater.connect.api import PathRefused, check_path

__all__ = ["SSL_MODES", "KeyNames", "SslMode", "explain_failure", "libpq_keywords", "passthrough", "tls_params"]

SslMode = Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]
SSL_MODES: tuple[str, ...] = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")

#: libpq parameters set from the connectors' typed keys only: passed through under their libpq name they
#: would contradict those keys (or, for ``replication``, turn the query connections into walsenders)
_TYPED = {"host", "port", "user", "password", "dbname", "replication",
          "sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword"}
_VERIFYING = ("verify-ca", "verify-full")
_PEM_KEY = b"-----BEGIN "


@cache
def libpq_keywords() -> frozenset[str]:
    """The connection parameters of the libpq psycopg runs on (PQconndefaults), so a newer libpq's are known."""
    return frozenset(o.keyword.decode() for o in pq.Conninfo.get_defaults())


@dataclass(frozen=True)
class KeyNames:
    """How an error names a libpq parameter: as a key of its own (``database.sslkey``), or as a parameter in
    the query of a URL key (``connection.url``)."""

    prefix: str = ""
    url_key: str = ""

    def key(self, param: str) -> str:
        return f"the {param} parameter of {self.url_key}" if self.url_key else f"{self.prefix}{param}"

    def error(self, param: str, problem: str) -> ValueError:
        if self.url_key:
            return ValueError(f"{self.url_key}: parameter {param} {problem}")
        return ValueError(f"{self.prefix}{param}: {problem}")


def passthrough(param: str, names: KeyNames, known: Iterable[str]) -> None:
    """Accept ``param`` as a libpq parameter passed unchanged, or raise naming the key (a typo never reaches
    libpq); ``known`` are the connector's own names, offered when ``param`` is close to one."""
    if param in libpq_keywords() and param not in _TYPED:
        return
    if param in libpq_keywords():
        raise names.error(param, f"is libpq's {param}, which the connector sets from its own keys: use those")
    close = difflib.get_close_matches(param, [*known, *sorted(libpq_keywords() - _TYPED)], n=1)
    hint = f" (did you mean {close[0] if names.url_key else names.key(close[0])}?)" if close else ""
    raise names.error(param, f"is not a setting of this connector nor a libpq connection parameter{hint}")


def _readable_file(path: str, param: str, names: KeyNames) -> Path:
    try:  # within the worker's connector.allowed.paths, like every file a connector reads
        check_path(names.url_key or names.key(param), path, "read")
    except PathRefused as exc:
        raise names.error(param, str(exc).partition(": ")[2]) from None
    file = Path(path)
    if not file.is_file():
        raise names.error(param, f"file {path} does not exist (or is not a file)")
    if not os.access(file, os.R_OK):
        raise names.error(param, f"file {path} cannot be read by this worker (check its permissions)")
    return file


def tls_params(sslmode: str, sslrootcert: str, sslcert: str, sslkey: str, sslpassword: str,
               names: KeyNames) -> dict[str, str]:
    """libpq's TLS parameters, checked: a known sslmode, files that exist and can be read, a client
    certificate with its key, a PEM key (what libpq reads), a password for an encrypted key."""
    if sslmode not in SSL_MODES:
        raise names.error("sslmode", f"{sslmode!r} is not one of {', '.join(SSL_MODES)}")
    out = {"sslmode": sslmode}
    if sslrootcert and sslrootcert != "system":  # libpq's "system": the system's trusted CAs
        _readable_file(sslrootcert, "sslrootcert", names)
    elif not sslrootcert and sslmode in _VERIFYING and not (Path.home() / ".postgresql" / "root.crt").is_file():
        raise names.error("sslmode", f"{sslmode} checks the server's certificate against the CA file in "
                                     f"{names.key('sslrootcert')}: set it (or sslrootcert=system for the "
                                     f"system's trusted CAs)")
    if bool(sslcert) != bool(sslkey):
        missing, given = ("sslkey", "sslcert") if sslcert else ("sslcert", "sslkey")
        raise names.error(missing, f"is needed with {names.key(given)} (a client certificate and its private key go "
                                   f"together)")
    if sslcert:
        _readable_file(sslcert, "sslcert", names)
        head = _readable_file(sslkey, "sslkey", names).read_bytes()[:4096]
        if _PEM_KEY not in head:
            raise names.error("sslkey", f"file {sslkey} is not a PEM key, which libpq needs (a pgjdbc .pk8 DER key "
                                        f"converts with: openssl pkey -inform DER -in key.pk8 -out key.pem)")
        if b"ENCRYPTED" in head and not sslpassword:
            raise names.error("sslkey", f"file {sslkey} is encrypted: set {names.key('sslpassword')}")
    for param, value in (("sslrootcert", sslrootcert), ("sslcert", sslcert), ("sslkey", sslkey),
                         ("sslpassword", sslpassword)):
        if value:
            out[param] = value
    return out


def explain_failure(message: str, names: KeyNames) -> str:
    """libpq's message of a failed connection, with what to change when TLS is the cause."""
    if "no encryption" in message and "pg_hba.conf" in message:
        hint = (f"the server takes only TLS connections from here: set {names.key('sslmode')} to verify-full "
                f"(or require, verify-ca)")
    elif "certificate verify failed" in message or "signature failure" in message:
        # a signature failure: the CA file holds a CA of the issuer's name but another key (a CA made anew)
        hint = (f"the server's certificate failed verification against {names.key('sslrootcert')}: it must hold "
                f"the CA that signed the server's certificate")
    elif "does not match host name" in message:
        hint = "the server's certificate does not name the host connected to: connect by a name it holds"
    elif "server does not support SSL" in message:
        hint = "the server has ssl = off: turn it on in postgresql.conf, or lower sslmode"
    else:
        return message
    return f"{message} ({hint})"
