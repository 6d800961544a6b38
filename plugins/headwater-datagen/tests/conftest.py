"""Let the tests run without installing the plugin: fall back to the source tree."""

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("headwater_datagen") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
