"""Headless Chromium for the browser tests: Debian's own Chromium through Debian's chromedriver, both given by
path so that Selenium Manager never looks for (or downloads) a browser; it resolves no host name but loopback
addresses, so nothing leaves the machine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CHROMEDRIVER", "CHROMIUM", "WINDOW", "start_chromium"]

CHROMIUM = Path(os.environ.get("HEADWATER_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("HEADWATER_CHROMEDRIVER", "/usr/bin/chromedriver"))
WINDOW = (1400, 900)


def start_chromium(profile: Path, *extra_args: str) -> Any:
    """A new headless Chromium with its own profile folder (``extra_args`` added to the usual ones)."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: install Debian's chromium and chromium-driver")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never fetch a driver or a browser
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={WINDOW[0]},{WINDOW[1]}", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-sync", "--disable-background-networking",
                "--disable-component-update", "--disable-default-apps", "--no-proxy-server",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
                f"--user-data-dir={profile}", *extra_args):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
