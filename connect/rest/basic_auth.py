"""Kafka's ``BasicAuthSecurityRestExtension``: HTTP basic authentication on the REST API, with the JAAS file
and the credentials file written for Kafka Connect accepted as they are.

The JAAS file is the worker property ``java.security.auth.login.config`` or, as Kafka's scripts pass it,
``-Djava.security.auth.login.config=<file>`` in ``KAFKA_OPTS``; its ``KafkaConnect`` section names the
credentials file::

    KafkaConnect {
      org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required
      file="/etc/kafka/connect.password";
    };

whose lines are ``user: password`` (or ``user=password``). A request without the right credentials is
answered 401 with ``WWW-Authenticate: Basic`` (the browser's prompt); worker-to-worker requests are not
asked for them (they are signed). Unlike Kafka, a credentials file with no user is refused at start
rather than letting everyone in.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import os
import shlex
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from headwater.kafka.jaas import JaasError, parse_jaas_file
from headwater.properties import load_properties

from ..api.errors import ConfigException
from ..api.rest_extension import RestExtension

if TYPE_CHECKING:
    from .extensions import RestContext

__all__ = ["LOGIN_CONFIG", "BasicAuthSecurityRestExtension", "PropertyFileCredentials", "login_config_path"]

log = logging.getLogger(__name__)

LOGIN_CONFIG = "java.security.auth.login.config"
SECTION = "KafkaConnect"
LOGIN_MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"
REALM = "Kafka Connect"
_DENIED = "User cannot access the resource."  # Kafka's JaasBasicAuthFilter


def login_config_path(configs: Mapping[str, str], environ: Mapping[str, str] = os.environ) -> str | None:
    """The JAAS file: the worker property, else ``-Djava.security.auth.login.config=`` in ``KAFKA_OPTS``."""
    if configs.get(LOGIN_CONFIG):
        return configs[LOGIN_CONFIG]
    for word in shlex.split(environ.get("KAFKA_OPTS", "")):
        if word.startswith(f"-D{LOGIN_CONFIG}="):
            return word.split("=", 1)[1].removeprefix("=")  # Java reads "==file" as "this file only"
    return None


class PropertyFileCredentials:
    """The users and passwords of a ``user: password`` file, checked in constant time."""

    def __init__(self, path: str) -> None:
        try:
            users = load_properties(path)
        except OSError as exc:
            raise ConfigException(f"{LOGIN_CONFIG}: the credentials file {path} named in section {SECTION} cannot be "
                                  f"read: {exc.strerror or exc}", LOGIN_CONFIG) from None
        if not users:
            raise ConfigException(f"{LOGIN_CONFIG}: the credentials file {path} has no 'user: password' line "
                                  "(an empty file would let everyone in)", LOGIN_CONFIG)
        self._users = {user.encode(): password.encode() for user, password in users.items()}
        self._unknown = b"\0" * 32

    def check(self, user: str, password: str) -> bool:
        given = password.encode()
        expected = self._users.get(user.encode())
        # the same comparison for a wrong user as for a wrong password: timing does not tell users apart
        same = hmac.compare_digest(given, expected if expected is not None else self._unknown)
        return expected is not None and same


def _credentials_file(jaas_path: str) -> str:
    try:
        text = Path(jaas_path).read_text()
    except OSError as exc:
        raise ConfigException(f"{LOGIN_CONFIG}: cannot read {jaas_path}: {exc.strerror or exc}", LOGIN_CONFIG) from None
    try:
        sections = parse_jaas_file(text)
    except JaasError as exc:
        raise ConfigException(f"{LOGIN_CONFIG}: {jaas_path} is not a JAAS file ({exc})", LOGIN_CONFIG) from None
    modules = sections.get(SECTION)
    if not modules:
        raise ConfigException(f"{LOGIN_CONFIG}: {jaas_path} has no {SECTION} section (found: "
                              f"{', '.join(sections) or 'none'})", LOGIN_CONFIG)
    if len(modules) != 1 or modules[0].class_name != LOGIN_MODULE:
        raise ConfigException(f"{LOGIN_CONFIG}: section {SECTION} of {jaas_path} must hold one login module, "
                              f"{LOGIN_MODULE} (found: {', '.join(m.class_name for m in modules)})", LOGIN_CONFIG)
    file = modules[0].options.get("file")
    if not file:
        raise ConfigException(f"{LOGIN_CONFIG}: {LOGIN_MODULE} in {jaas_path} needs file=\"<credentials file>\"",
                              LOGIN_CONFIG)
    return file


def _basic(header: str) -> tuple[str, str] | None:
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")  # split at the first colon, as Kafka does
    return (user, password) if colon else None


class BasicAuthSecurityRestExtension(RestExtension):
    """HTTP basic authentication against a JAAS ``PropertyFileLoginModule`` credentials file."""

    aliases = ("org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension",)

    def __init__(self) -> None:
        self.credentials: PropertyFileCredentials | None = None

    def configure(self, configs: dict[str, str]) -> None:
        path = login_config_path(configs)
        if path is None:
            raise ConfigException(f"{LOGIN_CONFIG}: BasicAuthSecurityRestExtension needs a JAAS file with a {SECTION} "
                                  f"section: set the worker property {LOGIN_CONFIG}=<file> or KAFKA_OPTS="
                                  f"-D{LOGIN_CONFIG}=<file>", LOGIN_CONFIG)
        self.credentials = PropertyFileCredentials(_credentials_file(path))

    def register(self, context: RestContext) -> None:
        credentials = self.credentials
        assert credentials is not None, "configure() first"
        plain = [str(x) for x in context.config.rest_listeners() if x.scheme == "http" and not x.host.startswith("127.")
                 and x.host not in ("localhost", "::1")]
        if plain:
            log.warning("basic authentication on %s: passwords cross the network in clear; use https:// listeners",
                        ", ".join(plain))

        @web.middleware
        async def basic_auth(request: web.Request,
                             handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
            if context.is_internal_request(request):
                return await handler(request)
            given = _basic(request.headers.get("Authorization", ""))
            if given is None or not credentials.check(*given):
                return context.error(401, _DENIED, {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'})
            return await handler(request)

        context.add_middleware(basic_auth)
