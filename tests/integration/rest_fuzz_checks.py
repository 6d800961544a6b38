"""schemathesis checks of the REST fuzz test's own (loaded through ``SCHEMATHESIS_HOOKS``).

The document marks a 400 that depends on the server's state or on the plugin a config names
(``x-state-dependent``), and the fuzz test expects 400 from those operations for requests the
document calls valid. What the document does say must still hold there: a config whose
``connector.class`` the document offers names a plugin the server has.
"""

from __future__ import annotations

from typing import Any

import schemathesis

# UnknownPlugin's message for a connector (headwater.connect.plugins)
UNKNOWN_CONNECTOR = "Failed to find any class that implements connector "


@schemathesis.check
def offered_connector_class_is_installed(ctx: Any, response: Any, case: Any) -> None:
    """A request the document calls valid is not refused for naming a connector plugin that is not installed."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 400:
        return
    if UNKNOWN_CONNECTOR in response.text:
        raise AssertionError(f"A connector.class the document offers was refused: {response.text}")
