"""No page of the console holds a password: a Postgres source whose password comes from the file config provider
and one whose password was written in clear, both streaming from a PostgreSQL that checks it (scram-sha-256).
The connector pages, the list, the edit form (its password field a password input holding [hidden]) and the
config topic's page show no clear password in the DOM or in any input's value; saving the edit form keeps the
stored password (the source reconnects with it), and the config topic's records are not shown."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from support.connectproc import ConnectProcess, unique, wait_for
from support.pgpassword import PasswordPostgres, start_password_postgres, walsenders
from support.workerproc import read_topic
from test_console import click, field, open_page, text_of, until

pytestmark = pytest.mark.timeout(180)

PASSWORD = "pw-" + uuid.uuid4().hex
CONFIGS = "connect-configs"  # headwater up's config.storage.topic


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ConnectProcess, PasswordPostgres, Path]]:
    base = tmp_path_factory.mktemp("console-secrets")
    secrets = base / "secrets"
    secrets.mkdir()
    (secrets / "db.properties").write_text(f"password={PASSWORD}\n")
    pg = start_password_postgres(PASSWORD)
    try:
        providers = {"config.providers": "file",
                     "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
                     "config.providers.file.param.allowed.paths": str(secrets)}
        with ConnectProcess(base / "up", settings=providers) as proc:
            yield proc, pg, secrets
            print(f"headwater up log: {proc.log_file}")
    finally:
        pg.stop()


def dom_text(driver: WebDriver) -> str:
    """The page's markup and every input's current value (which the markup does not show)."""
    values = driver.execute_script(
        "return [...document.querySelectorAll('input, textarea, select')].map((e) => e.value).join('\\n')")
    return driver.page_source + "\n" + values


def test_no_console_page_shows_a_password_and_an_edit_keeps_it(secured, browser: WebDriver) -> None:
    up, pg, secrets = secured
    placeholder, clear = unique("console-ph"), unique("console-clear")
    prefixes = {placeholder: unique("cph"), clear: unique("ccl")}
    up.create(placeholder, pg.cdc_source(prefixes[placeholder], f"${{file:{secrets}/db.properties:password}}"))
    up.create(clear, pg.cdc_source(prefixes[clear], PASSWORD))
    for name in (placeholder, clear):
        up.wait_state(name, "RUNNING", tasks=1, timeout=60)

    open_page(browser, up, "/connectors")
    until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-connector="{clear}"]'), "the list")
    assert PASSWORD not in dom_text(browser)
    for name in (placeholder, clear):
        open_page(browser, up, f"/connectors/{name}")
        until(browser, lambda d: text_of(d, ".page-head .state") == "RUNNING", f"{name} RUNNING")
        until(browser, lambda d: "database.password" in text_of(d, ".config"), f"{name}'s configuration")
        assert PASSWORD not in dom_text(browser), name
    open_page(browser, up, f"/topics/{CONFIGS}")
    until(browser, lambda d: "not shown" in text_of(d, ".tail"), "the internal topic's tail left out")
    assert PASSWORD not in dom_text(browser)

    # The edit form: the password field is a password input holding [hidden]; saving keeps the stored password
    before = wait_for(lambda: walsenders(pg.server, prefixes[clear]), 30, 0.2, "the source's replication connection")
    open_page(browser, up, f"/connectors/{clear}")
    click(browser, '[data-action="edit"]', "Edit")
    password = until(browser, lambda d: field(d, "database.password"), "the edit form")
    assert password.get_attribute("type") == "password"
    assert password.get_attribute("value") == "[hidden]"
    assert PASSWORD not in dom_text(browser)
    field(browser, "max.batch.size").send_keys("100")
    until(browser, lambda d: "accepts" in text_of(d, ".validity"), "the worker to accept the change")
    click(browser, "#submit", "Save")
    until(browser, lambda d: d.current_url.endswith(f"#/connectors/{clear}"), "back on the connector's page")

    def stored() -> dict[str, str] | None:
        for _, _, key, value in reversed(read_topic(up.bootstrap, CONFIGS)):
            if key == f"connector-{clear}".encode() and value:
                props = json.loads(value)["properties"]
                return props if props.get("max.batch.size") == "100" else None
        return None

    assert wait_for(stored, 30, 0.2, "the edited config in the config topic")["database.password"] == PASSWORD
    wait_for(lambda: walsenders(pg.server, prefixes[clear]) - before, 60, 0.2,
             "the restarted task's replication connection, authenticated with the kept password", up.log_text)
    up.wait_state(clear, "RUNNING", tasks=1, timeout=60)
    assert up.ok("GET", f"/connectors/{clear}/config")["database.password"] == "[hidden]"
    assert PASSWORD not in dom_text(browser)
    assert PASSWORD not in up.log_text()
