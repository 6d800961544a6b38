"""Which config keys hold secrets: the one rule the REST answers, the console, validation messages and logs
follow. A key is secret when the plugin's config model declares it ``SecretStr`` (Kafka's PASSWORD type)
or when its name is one Kafka and its connectors give passwords and keys (``*.password``,
``sasl.jaas.config``, ``ssl.keystore.key``, ``*.secret``, ...), whatever prefix it carries
(``producer.override.sasl.jaas.config``, ``transforms.x.api.secret``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, SecretStr

__all__ = ["HIDDEN", "hide_url_secrets", "is_secret_key", "is_url_key", "secret_fields", "secret_keys"]

#: What a secret value is shown as (Kafka's ``Password.toString()``).
HIDDEN = "[hidden]"

# The last dotted part(s) of a secret key: Kafka's PASSWORD-typed keys (ssl.key.password, ssl.keystore.password,
# ssl.truststore.password, ssl.keystore.key, sasl.jaas.config, sasl.oauthbearer.client.secret, basic.auth.user.info),
# Debezium's and JDBC's (database.password, database.sslpassword, connection.password), and the usual names of
# credentials in third-party connectors (*.secret, *.secret.key, *.api.key, *.token, *.credentials).
_SECRET_NAME = re.compile(
    r"(?:^|\.)(?:[a-z0-9_-]*password|passwd|secret|secret\.key|secret\.access\.key|api\.key|access\.token|"
    r"auth\.token|token|credentials|private\.key|sasl\.jaas\.config|ssl\.keystore\.key|basic\.auth\.user\.info)$",
    re.IGNORECASE)


# A URL's password parameters (pgjdbc's password and sslpassword) and the password of its user information.
_URL_PASSWORD_PARAM = re.compile(r"((?:^|[?&;])(?:ssl)?password=)[^&;]*", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(://[^/:@?#\s]*:)[^/@?#\s]+(@)")


def hide_url_secrets(url: str) -> str:
    """``url`` with the passwords it carries (``?password=``, ``user:password@``) shown as ``[hidden]``."""
    return _URL_USERINFO.sub(rf"\1{HIDDEN}\2", _URL_PASSWORD_PARAM.sub(rf"\1{HIDDEN}", url))


def is_url_key(key: str) -> bool:
    """A key whose value is a URL, which may carry a password (``connection.url``)."""
    return key.lower().endswith(("url", "uri"))


def is_secret_key(key: str) -> bool:
    """True when ``key``'s name says it holds a secret, whichever plugin reads it."""
    return bool(_SECRET_NAME.search(key))


def secret_fields(model: type[BaseModel] | None) -> set[str]:
    """The keys (aliases) ``model`` declares as ``SecretStr`` (or ``SecretStr | None``)."""
    if model is None:
        return set()
    out = set()
    for name, f in model.model_fields.items():
        annotation = f.annotation
        if annotation is SecretStr or SecretStr in getattr(annotation, "__args__", ()):
            out.add(f.alias or name)
    return out


def secret_keys(keys: Iterable[str], model: type[BaseModel] | None = None) -> set[str]:
    """Those of ``keys`` that hold secrets: named so, or declared ``SecretStr`` by ``model``."""
    declared = secret_fields(model)
    return {k for k in keys if k in declared or is_secret_key(k)}
