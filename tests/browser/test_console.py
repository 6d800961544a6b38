"""The web console in a real browser against a real ``headwater up``: a file pipeline created through
the form runs, its record count follows the file and it pauses; a bad field is named next to it; the
Topics page shows offsets and a live tail; the Groups page shows a sink's lag.

Every wait is an explicit WebDriverWait on what the page shows. With ``HEADWATER_SCREENSHOTS=<dir>``
the pages are saved there as PNGs (the ones in docs/console/ come from this module).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait
from support.connectproc import ConnectProcess, create_topic, produce, sink_config, unique, wait_for

pytestmark = pytest.mark.timeout(120)

WAIT = 30  # seconds: generous, each wait ends as soon as the page shows what it waits for
FILE_SOURCE = "headwater.connectors.file.source.FileStreamSourceConnector"
SHOTS = os.environ.get("HEADWATER_SCREENSHOTS")


def shot(driver: WebDriver, name: str) -> None:
    """Save the page, all of it, as ``<HEADWATER_SCREENSHOTS>/<name>.png`` (nothing without the variable)."""
    if not SHOTS:
        return
    folder = Path(SHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    driver.execute_script("window.scrollTo(0, 0); document.activeElement && document.activeElement.blur && "
                          "document.activeElement.blur()")
    bottom = driver.execute_script("return Math.ceil(document.getElementById('page').getBoundingClientRect().bottom)")
    width = driver.execute_script("return window.innerWidth")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": max(560, int(bottom)),
                                                                  "deviceScaleFactor": 1, "mobile": False})
    try:
        driver.save_screenshot(str(folder / f"{name}.png"))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def until(driver: WebDriver, check: Callable[[WebDriver], Any], what: str, timeout: float = WAIT) -> Any:
    """Wait for ``check`` to return something truthy (stale or missing elements count as not yet)."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    return WebDriverWait(driver, timeout, poll_frequency=0.1,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
                         ).until(check, f"waiting for {what}")


def text_of(driver: WebDriver, css: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, css).text


def click(driver: WebDriver, css: str, what: str) -> None:
    """Click what ``css`` finds, once it can be: pages redraw their tables and buttons as they poll, so an
    element found a moment ago may have been replaced."""
    def press(d: WebDriver) -> bool:
        d.find_element(By.CSS_SELECTOR, css).click()
        return True

    until(driver, press, f"to click {what}")


def number(text: str) -> int | None:
    digits = text.replace(",", "").strip()
    return int(digits) if re.fullmatch(r"\d+", digits) else None


def open_page(driver: WebDriver, up: ConnectProcess, route: str) -> None:
    """A fresh load of the console at ``route`` (the same URL again would only be a same-page hash)."""
    driver.get("about:blank")
    driver.get(f"{up.rest}/ui/#{route}")


def choose_plugin(driver: WebDriver, cls: str) -> None:
    until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'#f-class option[value="{cls}"]'), "the plugin list")
    Select(driver.find_element(By.ID, "f-class")).select_by_value(cls)
    until(driver, lambda d: d.find_element(By.CSS_SELECTOR, '[data-field="topic"] input'), "the plugin's fields")


def field(driver: WebDriver, key: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, f'[data-field="{key}"] input')


def field_error(driver: WebDriver, key: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, f'[data-field="{key}"] .field-error').text


def test_a_bad_field_is_named_next_to_it(up: ConnectProcess, browser: WebDriver) -> None:
    open_page(browser, up, "/new")
    choose_plugin(browser, FILE_SOURCE)
    browser.find_element(By.ID, "f-name").send_keys(unique("console-bad"))
    tasks = field(browser, "tasks.max")
    tasks.send_keys("two")
    error = until(browser, lambda d: field_error(d, "tasks.max"), "the tasks.max error next to the field")
    assert "tasks.max" in error and "integer" in error
    assert "invalid" in (browser.find_element(By.CSS_SELECTOR, '[data-field="tasks.max"]').get_attribute("class") or "")
    assert field_error(browser, "topic") == ""  # not shown before the user got to it
    # Creating shows the missing required field too, and creates nothing.
    click(browser, "#submit", "Create")
    missing = until(browser, lambda d: field_error(d, "topic"), "the missing topic named next to its field")
    assert "topic" in missing
    shot(browser, "new-connector-validation")
    assert browser.current_url.endswith("#/new")
    tasks.clear()
    tasks.send_keys("1")
    until(browser, lambda d: field_error(d, "tasks.max") == "", "the tasks.max error to go once it is fixed")


def test_a_file_pipeline_created_through_the_form_runs_counts_and_pauses(up: ConnectProcess, browser: WebDriver,
                                                                         tmp_path: Path) -> None:
    source = tmp_path / "lines.txt"
    source.write_text("".join(f"line {i}\n" for i in range(3)))
    name, topic = unique("console-src"), unique("console-lines")
    up.create(unique("console-copy"), sink_config(tmp_path / "copy.txt", topic))  # a sink beside it in the list
    open_page(browser, up, "/new")
    choose_plugin(browser, FILE_SOURCE)
    browser.find_element(By.ID, "f-name").send_keys(name)
    field(browser, "file").send_keys(str(source))
    field(browser, "topic").send_keys(topic)
    until(browser, lambda d: "accepts" in text_of(d, ".validity"), "the worker to accept the config")
    click(browser, "#submit", "Create")

    until(browser, lambda d: d.current_url.endswith(f"#/connectors/{name}"), "the connector's page")
    until(browser, lambda d: text_of(d, ".page-head .state") == "RUNNING", "RUNNING")
    until(browser, lambda d: number(text_of(d, '[data-figure="out-total"]')) == 3, "the 3 lines written")
    written = 3
    # Bursts of lines, each seen by the page: the count follows the file. (More of them for the
    # screenshots, so that the chart has a shape.)
    bursts = [40, 40, 40] + ([80, 20, 120, 60, 100, 30, 90, 50, 70] if SHOTS else [])
    for burst, size in enumerate(bursts):
        with source.open("a") as f:
            f.write("".join(f"more {burst}-{i}\n" for i in range(size)))
        written += size
        until(browser, lambda d, n=written: number(text_of(d, '[data-figure="out-total"]')) == n,  # type: ignore[misc]
              f"{written} records written")
    until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chart path")) >= 2, "the throughput chart")
    assert text_of(browser, ".page-head .state") == "RUNNING"
    shot(browser, "connector-detail")

    click(browser, '[data-nav="connectors"]', "Connectors")  # the same page: the samples are kept
    row = f'tr[data-connector="{name}"]'
    until(browser, lambda d: number(text_of(d, f"{row} .total-out")) == written, "the list's record count")
    until(browser, lambda d: all(cell.text.endswith("/s") for cell in d.find_elements(By.CSS_SELECTOR, ".rate-out")),
          "the list's rates")
    assert text_of(browser, f"{row} .state") == "RUNNING"
    assert up.rest.split("//")[1] in text_of(browser, f"{row} .task-chip")  # the worker it runs on
    shot(browser, "connectors")

    click(browser, f"{row} a.name", "the connector")
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, '[data-action="pause"]').is_enabled(), "Pause")
    click(browser, '[data-action="pause"]', "Pause")
    until(browser, lambda d: text_of(d, ".page-head .state") == "PAUSED", "PAUSED")
    assert up.status(name)["connector"]["state"] == "PAUSED"
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, '[data-action="resume"]').is_enabled(), "Resume")


def test_edit_stop_resume_restart_and_delete_with_confirmation(up: ConnectProcess, browser: WebDriver,
                                                               tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("one\ntwo\n")
    name = unique("console-edit")
    up.create(name, {"connector.class": "FileStreamSource", "file": str(source), "topic": unique("console-edit"),
                     "transforms": "stamp", "transforms.stamp.type": "InsertHeader",
                     "transforms.stamp.header": "origin", "transforms.stamp.value.literal": "console"})
    up.wait_state(name, "RUNNING", tasks=1)
    open_page(browser, up, f"/connectors/{name}")
    until(browser, lambda d: text_of(d, ".page-head .state") == "RUNNING", "RUNNING")

    click(browser, '[data-action="edit"]', "Edit")
    size = until(browser, lambda d: field(d, "batch.size"), "the edit form")
    assert browser.find_element(By.ID, "f-name").get_attribute("value") == name
    extras = browser.find_element(By.ID, "f-extras").get_attribute("value") or ""
    assert "transforms.stamp.type=InsertHeader" in extras
    size.send_keys("25")
    until(browser, lambda d: "accepts" in text_of(d, ".validity"), "the worker to accept the change")
    click(browser, "#submit", "Create")
    until(browser, lambda d: d.current_url.endswith(f"#/connectors/{name}"), "back on the connector's page")
    config = up.ok("GET", f"/connectors/{name}/config", expect=200)
    assert config["batch.size"] == "25" and config["transforms.stamp.value.literal"] == "console"

    def press(action: str, state: str) -> None:
        until(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'[data-action="{action}"]').is_enabled(), action)
        click(browser, f'[data-action="{action}"]', action)
        until(browser, lambda d: text_of(d, ".page-head .state") == state, state)

    press("stop", "STOPPED")
    press("resume", "RUNNING")
    press("restart", "RUNNING")

    click(browser, '[data-action="delete"]', "Delete")
    click(browser, "dialog[open] .cancel", "Cancel in the confirmation")
    until(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "dialog"), "the dialog to close")
    assert name in up.connector_names()  # cancelled: nothing deleted
    click(browser, '[data-action="delete"]', "Delete")
    click(browser, "dialog[open] .confirm-action", "Delete in the confirmation")
    until(browser, lambda d: d.current_url.endswith("#/connectors"), "the list after the delete")
    wait_for(lambda: name not in up.connector_names(), WAIT, 0.1, f"{name} to be deleted")
    until(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, f'tr[data-connector="{name}"]'), "gone from the list")


def test_topics_page_shows_end_offsets_and_a_live_tail(up: ConnectProcess, browser: WebDriver) -> None:
    topic = unique("console-topic")
    produce(up.bootstrap, topic, [(f"k{i}".encode(), f"reading {i}: 21.{i} °C".encode(), [("unit", b"celsius")])
                                  for i in range(12)])
    open_page(browser, up, "/topics")
    row = f'tr[data-topic="{topic}"]'
    until(browser, lambda d: number(text_of(d, f"{row} .end")) == 12, "the topic with end offset 12")
    assert number(text_of(browser, f"{row} .records")) == 12
    click(browser, f"{row} a", "the row's link")
    until(browser, lambda d: "reading 11: 21.11 °C" in text_of(d, 'tr[data-offset="11"] .value'), "the tail")
    assert text_of(browser, 'tr[data-offset="11"] .key') == "k11"
    assert "unit: celsius" in text_of(browser, 'tr[data-offset="11"] .headers')
    assert number(text_of(browser, '[data-figure="end-offset"]')) == 12
    produce(up.bootstrap, topic, [(None, b"a record that came later", [])])
    until(browser, lambda d: "came later" in text_of(d, 'tr[data-offset="12"] .value'), "the tail to follow")
    shot(browser, "topic-tail")
    open_page(browser, up, "/topics")
    until(browser, lambda d: number(text_of(d, f"{row} .end")) == 13, "the list to follow")
    shot(browser, "topics")


def test_groups_page_shows_a_sink_group_with_its_lag(up: ConnectProcess, browser: WebDriver, tmp_path: Path) -> None:
    topic, name = unique("console-sink-topic"), unique("console-sink")
    create_topic(up.bootstrap, topic)
    produce(up.bootstrap, topic, [(None, f"r{i}".encode(), []) for i in range(10)])
    up.create(name, sink_config(tmp_path / "out.txt", topic))
    group = f"connect-{name}"

    def committed() -> bool:
        resp = up.get(f"/admin/groups/{group}")
        return resp.status == 200 and any(o["committed_offset"] == 10 for o in resp.json["offsets"])

    wait_for(committed, WAIT, 0.2, "the sink to commit its 10 records", up.log_text)
    up.ok("PUT", f"/connectors/{name}/pause", expect=202)
    up.wait_state(name, "PAUSED", tasks=1)
    produce(up.bootstrap, topic, [(None, f"late {i}".encode(), []) for i in range(7)])

    open_page(browser, up, "/groups")
    row = f'tr[data-group="{group}"]'
    until(browser, lambda d: number(text_of(d, f"{row} .lag")) == 7, "the sink's group with lag 7")
    shot(browser, "groups")
    click(browser, f"{row} a", "the row's link")
    until(browser, lambda d: number(text_of(d, f'tr[data-partition="{topic}-0"] .lag')) == 7, "lag per partition")
    assert number(text_of(browser, '[data-figure="lag"]')) == 7
    until(browser, lambda d: name in text_of(d, ".page-head .sub"), "the link to the sink connector")
    shot(browser, "group-detail")

    # The sink's own page has its lag per partition (its task's view: fetched position against the end).
    open_page(browser, up, f"/connectors/{name}")
    until(browser, lambda d: number(text_of(d, f'.lag tr[data-partition="{topic}-0"] .lag')) is not None,
          "the connector page's lag per partition")
    assert text_of(browser, ".page-head .state") == "PAUSED"


def test_a_cdc_connector_shows_its_snapshot_and_the_slots_retained_wal(up: ConnectProcess, browser: WebDriver,
                                                                         postgres: Any) -> None:
    import uuid

    import psycopg

    database = f"console_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        db.execute("CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL)")
        db.execute("INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(1, 500) g")
    name = unique("console-cdc")
    password = postgres.password or "trust-ignores-it"  # the test server trusts loopback connections
    up.create(name, {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                     "database.hostname": postgres.host, "database.port": str(postgres.port),
                     "database.user": postgres.user, "database.password": password,
                     "database.dbname": database, "topic.prefix": unique("shop"), "plugin.name": "pgoutput",
                     "slot.name": f"slot_{uuid.uuid4().hex[:8]}", "publication.name": f"pub_{uuid.uuid4().hex[:6]}"})
    open_page(browser, up, f"/connectors/{name}")
    until(browser, lambda d: text_of(d, '[data-figure="cdc-phase"]') == "streaming", "the streaming phase")
    until(browser, lambda d: "Tables 1 of 1 · completed" in text_of(d, ".cdc"), "the finished snapshot")
    assert re.search(r"Rows 500 (of about|scanned)", text_of(browser, ".cdc"))
    until(browser, lambda d: re.search(r"\d B|KiB|MiB", text_of(d, '[data-figure="retained-wal"]')),
          "the slot's retained WAL")
    assert "of 1.0 GiB" in text_of(browser, '[data-figure="retained-wal"]')  # slot.max.retained.wal.bytes
    until(browser, lambda d: number(text_of(d, '[data-figure="out-total"]')) == 500, "the 500 snapshot records")
    # Then changes, streamed: the page counts them. (More batches for the screenshots: a chart with a shape.)
    total = 500
    with psycopg.connect(postgres.dsn(database), autocommit=True) as db:
        for size in [30, 60, 20] + ([90, 40, 120, 70, 50, 100] if SHOTS else []):
            db.execute("INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(%s::int, %s::int) g",
                       (total + 1, total + size))
            total += size
            until(browser, lambda d, n=total: number(text_of(d, '[data-figure="out-total"]')) == n,  # type: ignore[misc]
                  f"{total} records")
    assert number(text_of(browser, '[data-figure="cdc-events"]')) == total - 500
    config = text_of(browser, ".config")
    assert password not in config and "••••••" in config  # the password is not shown
    until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chart path")) >= 2, "the throughput chart")
    shot(browser, "cdc-connector")
    up.ok("DELETE", f"/connectors/{name}", expect=204)


def test_no_script_failed(browser: WebDriver) -> None:
    """Nothing the pages ran threw (network answers such as a 404 for a task not running yet aside)."""
    logged = browser.get_log("browser")  # type: ignore[attr-defined]  # Chromium's driver has it
    errors = [e for e in logged if e["level"] == "SEVERE" and e.get("source") != "network"]
    assert errors == []
