"""The console in a real browser: Debian's chromium, headless, driven by Selenium through
Debian's chromium-driver (``make install`` installs both; nothing is downloaded at run time).

One browser and one console serve the module; each test walks pages as a user would, checks
what the page shows, reads the browser's console for JavaScript errors and saves a
screenshot under build/test-artifacts/console/ (or $ODRADEK_TEST_ARTIFACTS). What changes
while the page is open (a live tail's rows, a lag chart's samples) is waited for in the
DOM, never assumed after a pause.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARTIFACTS = (
    Path(
        os.environ.get(
            "ODRADEK_TEST_ARTIFACTS",
            Path(__file__).resolve().parents[2] / "build" / "test-artifacts",
        )
    )
    / "console"
)

if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
    pytest.skip(
        "Debian's chromium and chromium-driver are not installed "
        "(`make install` installs them when run as root)",
        allow_module_level=True,
    )

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (the test extra)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    driver.implicitly_wait(10)
    yield driver
    driver.quit()


def page_done(browser, name: str) -> None:
    """Save a screenshot of the page as ``name``.png; fail on any error in its console."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"{name}.png"))
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], f"{name}: errors in the browser's console"


def submit(browser, form, landing: str) -> None:
    """Submit ``form`` and wait for the page it leads to (its URL contains ``landing``):
    until then the old page, with its own notices, is still the document."""
    form.find_element(By.CSS_SELECTOR, "button").click()
    WebDriverWait(browser, 30).until(expected_conditions.url_contains(landing))


def text(browser, css: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, css).text


def test_overview_shows_the_broker_and_its_leaders(browser, console, odradek_broker):
    browser.get(console.url + "/")
    assert browser.title.startswith("Overview")
    row = text(browser, "#brokers tbody tr")
    port = odradek_broker.bootstrap_servers.rsplit(":", 1)[1]
    assert port in row.split()
    assert "controller" in row
    page_done(browser, "overview")


def test_create_a_topic_produce_and_find_the_message(browser, console):
    browser.get(console.url + "/topics")
    form = browser.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "name").send_keys("browser-topic")
    form.find_element(By.NAME, "partitions").send_keys("2")
    submit(browser, form, "created=1")
    assert "Topic browser-topic created." in text(browser, "#notice")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")) == 2
    page_done(browser, "topic-created")

    form = browser.find_element(By.ID, "produce")
    form.find_element(By.NAME, "partition").send_keys("1")
    form.find_element(By.NAME, "key").send_keys("order-7")
    form.find_element(By.NAME, "value").send_keys('{"item": "lamp", "count": 2}')
    form.find_element(By.NAME, "headers").send_keys("source=browser")
    submit(browser, form, "produced=1")
    assert "partition 1 at offset 0" in text(browser, "#notice")
    page_done(browser, "message-produced")

    # The browser's own seek form: partition 1 from offset 0.
    browser.get(console.url + "/topics/browser-topic/messages")
    seek = browser.find_element(By.ID, "seek")
    seek.find_element(By.NAME, "partition").send_keys("1")
    seek.find_element(By.NAME, "offset").send_keys("0")
    submit(browser, seek, "offset=0")
    rows = browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")
    assert len(rows) == 1
    cells = rows[0].find_elements(By.TAG_NAME, "td")
    assert [c.text for c in cells[:2]] == ["1", "0"]
    assert cells[3].text == "order-7"
    assert cells[4].find_element(By.CSS_SELECTOR, "pre.json").text == (
        '{\n  "item": "lamp",\n  "count": 2\n}'
    )
    header = cells[5].find_element(By.TAG_NAME, "div")
    assert header.find_element(By.TAG_NAME, "b").text == "source"
    assert header.find_element(By.CSS_SELECTOR, "pre.text").text == "browser"
    page_done(browser, "message-browser")


def test_a_consumer_groups_lag(browser, console, odradek_broker):
    servers = odradek_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic("lag-topic", num_partitions=1)])["lag-topic"].result(30)
    producer = Producer({"bootstrap.servers": servers})
    for i in range(7):
        producer.produce("lag-topic", value=f"record {i}".encode(), partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "browser-group"})
    try:
        consumer.commit(offsets=[TopicPartition("lag-topic", 0, 3)], asynchronous=False)
    finally:
        consumer.close()

    browser.get(console.url + "/groups")
    browser.find_element(By.LINK_TEXT, "browser-group").click()
    assert text(browser, "#total-lag") == "4"
    row = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#lag tbody tr td")]
    assert row[:5] == ["lag-topic", "0", "3", "7", "4"]
    # The chart starts with the lag the page showed; the console samples it from then on.
    assert chart_lags(browser) == [4]
    WebDriverWait(browser, 30).until(lambda b: len(chart_lags(b, reload=True)) >= 3)
    assert set(chart_lags(browser)) == {4}
    page_done(browser, "group-lag")

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "browser-group"})
    try:
        consumer.commit(offsets=[TopicPartition("lag-topic", 0, 6)], asynchronous=False)
    finally:
        consumer.close()
    WebDriverWait(browser, 30).until(lambda b: chart_lags(b, reload=True)[-1] == 1)
    assert text(browser, "#total-lag") == "1"
    assert chart_lags(browser)[0] == 4
    title = browser.find_element(By.CSS_SELECTOR, "#lag-chart circle.point:last-of-type title")
    assert title.get_attribute("textContent").endswith("UTC: lag 1")
    page_done(browser, "group-lag-chart")


def chart_lags(browser, reload: bool = False) -> list[int]:
    """The lag of each point of the group page's chart, oldest first."""
    if reload:
        browser.refresh()
    points = browser.find_elements(By.CSS_SELECTOR, "#lag-chart circle.point")
    return [int(p.get_attribute("data-lag")) for p in points]


def test_live_tail_shows_new_records_as_they_arrive(browser, console, odradek_broker):
    servers = odradek_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic("live-topic", num_partitions=2)])["live-topic"].result(30)
    producer = Producer({"bootstrap.servers": servers})

    def produce(partition: int, *values: str) -> None:
        for value in values:
            producer.produce("live-topic", value=value.encode(), partition=partition)
        assert producer.flush(30) == 0

    def shown_values() -> list[str]:
        rows = browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")
        return [r.find_elements(By.TAG_NAME, "td")[4].text for r in rows]

    produce(1, "before")
    # Partition 1 only, the newest 5 rows kept.
    browser.get(console.url + "/topics/live-topic/messages?partition=1&limit=5")
    assert shown_values() == ["before"]
    browser.find_element(By.ID, "live-start").click()
    WebDriverWait(browser, 30).until(
        expected_conditions.text_to_be_present_in_element(
            (By.ID, "live-status"), "waiting for new records"
        )
    )
    produce(0, "elsewhere")
    produce(1, *(f"live-{i}" for i in range(8)))
    WebDriverWait(browser, 30).until(lambda b: shown_values()[-1:] == ["live-7"])
    assert shown_values() == [f"live-{i}" for i in range(3, 8)]
    partitions = browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr td:first-child")
    assert {p.text for p in partitions} == {"1"}
    page_done(browser, "live-tail")

    # Paused, the page misses nothing: it goes on from where it was.
    browser.find_element(By.ID, "live-pause").click()
    assert text(browser, "#live-status").startswith("Paused (at 1:9)")
    produce(1, "while-paused")
    browser.find_element(By.ID, "live-pause").click()
    WebDriverWait(browser, 30).until(lambda b: shown_values()[-1:] == ["while-paused"])
    assert shown_values() == [f"live-{i}" for i in range(4, 8)] + ["while-paused"]
    browser.find_element(By.ID, "live-stop").click()
    assert text(browser, "#live-status") == "Stopped."
    assert browser.find_element(By.ID, "live-start").is_enabled()
    page_done(browser, "live-tail-stopped")


def test_delete_a_topic_after_confirming(browser, console):
    browser.get(console.url + "/topics/browser-topic")
    browser.find_element(By.CSS_SELECTOR, "#delete-topic button").click()
    WebDriverWait(browser, 10).until(expected_conditions.alert_is_present())
    browser.switch_to.alert.accept()
    WebDriverWait(browser, 30).until(expected_conditions.url_contains("deleted="))
    assert "Topic browser-topic deleted." in text(browser, "#notice")
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#topics tbody a")]
    assert "browser-topic" not in names
    page_done(browser, "topic-deleted")
