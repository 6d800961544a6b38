"""Fixtures of the browser tests: one ``headwater up`` and one headless Chromium for the module.

Selenium drives Debian's own Chromium through Debian's chromedriver, both given by path so that
Selenium Manager never looks for (or downloads) a browser; the browser resolves no host name but
loopback addresses, so nothing leaves the machine. ``HEADWATER_SCREENSHOTS=<dir>`` makes the tests
save screenshots of the pages they visit there (docs/console/ holds the ones the docs show).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.chromium import start_chromium
from support.connectproc import ConnectProcess


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectProcess]:
    with ConnectProcess(tmp_path_factory.mktemp("console")) as proc:
        yield proc
        print(f"headwater up log: {proc.log_file}")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    driver = start_chromium(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()
