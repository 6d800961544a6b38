"""Let the tests run without installing the plugin: fall back to the source tree, and hand the module
to the kit's worker (an installed plugin is found through its entry point as well)."""

import importlib.util
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("headwater_datagen") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


@pytest.fixture(scope="module")
def headwater_plugins() -> list[str]:
    return ["headwater_datagen"]
