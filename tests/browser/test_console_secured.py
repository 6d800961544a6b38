"""The console of a worker that serves HTTPS only and asks for basic authentication (Kafka's JAAS and
credentials files): without credentials the browser is asked for them (401 with WWW-Authenticate); with
them (sent by the browser on every request, as after its prompt) the pages load and a connector created
through the form runs (its writes pass the Origin check as the console's own)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from support.chromium import start_chromium
from support.connectproc import ConnectProcess, unique
from support.restdoors import BASIC_AUTH_EXTENSION, USERS, Pki, basic, basic_auth_files, https_settings, make_pki
from test_console import FILE_SOURCE, choose_plugin, click, field, text_of, until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("console-pki"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[ConnectProcess]:
    base = tmp_path_factory.mktemp("secured-console")
    jaas = basic_auth_files(base / "security")
    settings = {"listeners": "https://127.0.0.1:0", **https_settings(pki),
                "rest.extension.classes": BASIC_AUTH_EXTENSION, "java.security.auth.login.config": str(jaas)}
    with ConnectProcess(base, settings=settings, headers=basic("admin", USERS["admin"]),
                        ssl_context=pki.context()) as proc:
        yield proc


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[WebDriver]:
    # The worker's certificate is trusted by its key (as a private CA would be by the system's store)
    cert = x509.load_pem_x509_certificate(pki.worker.cert.read_bytes())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    pin = base64.b64encode(hashlib.sha256(spki).digest()).decode()
    driver = start_chromium(tmp_path_factory.mktemp("secured-profile"), f"--ignore-certificate-errors-spki-list={pin}")
    try:
        yield driver
    finally:
        driver.quit()


def test_the_console_over_https_asks_for_credentials_then_works(secured: ConnectProcess, chromium: WebDriver,
                                                                 tmp_path: Path) -> None:
    assert secured.rest.startswith("https://")
    existing = unique("secured-existing")
    source = tmp_path / "lines.txt"
    source.write_text("one\ntwo\n")
    secured.create(existing, {"connector.class": FILE_SOURCE, "file": str(source), "topic": unique("t")})

    # no credentials: the worker's 401, whose WWW-Authenticate makes a browser prompt for them
    chromium.execute_cdp_cmd("Network.enable", {})
    chromium.get(f"{secured.rest}/ui/")
    status = chromium.execute_script("return performance.getEntriesByType('navigation')[0].responseStatus")
    assert status == 401 and existing not in chromium.page_source

    # the credentials the prompt would take, sent with every request of the page (its fetches included)
    token = base64.b64encode(f"admin:{USERS['admin']}".encode()).decode()
    chromium.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})
    chromium.get("about:blank")
    chromium.get(f"{secured.rest}/ui/#/")
    until(chromium, lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-connector="{existing}"]'),
          "the connector list over HTTPS")
    assert chromium.execute_script("return location.protocol") == "https:"

    name = unique("secured-new")
    chromium.get("about:blank")
    chromium.get(f"{secured.rest}/ui/#/new")
    choose_plugin(chromium, FILE_SOURCE)
    chromium.find_element(By.ID, "f-name").send_keys(name)
    field(chromium, "file").send_keys(str(source))
    field(chromium, "topic").send_keys(unique("secured-topic"))
    until(chromium, lambda d: "accepts" in text_of(d, ".validity"), "the worker to accept the config")
    click(chromium, "#submit", "Create")
    until(chromium, lambda d: d.current_url.endswith(f"#/connectors/{name}"), "the connector's page")
    until(chromium, lambda d: text_of(d, ".page-head .state") == "RUNNING", "RUNNING")
    assert secured.status(name)["connector"]["state"] == "RUNNING"
