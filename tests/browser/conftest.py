"""Fixtures of the browser tests: one ``headwater up`` and one headless Chromium for the module.

Selenium drives Debian's own Chromium through Debian's chromedriver, both given by path so that
Selenium Manager never looks for (or downloads) a browser; the browser resolves no host name but
loopback addresses, so nothing leaves the machine. ``HEADWATER_SCREENSHOTS=<dir>`` makes the tests
save screenshots of the pages they visit there (docs/console/ holds the ones the docs show).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.connectproc import ConnectProcess

CHROMIUM = Path(os.environ.get("HEADWATER_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("HEADWATER_CHROMEDRIVER", "/usr/bin/chromedriver"))
WINDOW = (1400, 900)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectProcess]:
    with ConnectProcess(tmp_path_factory.mktemp("console")) as proc:
        yield proc
        print(f"headwater up log: {proc.log_file}")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
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
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
