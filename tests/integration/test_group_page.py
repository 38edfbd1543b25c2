"""The group page in a real headless chromium, over the real demo (`rebalance-monitor demo`: a
real broker, the simulated fleet, local Spark): a live double assignment shows there, its
queues marked, each with both owners, and in the page's recent history with its start time.
The page is kept as a screenshot in build/test-artifacts.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streaming.common.runbooks import finding_runbook_url
from tests.integration.browser import headless_chromium, keep, require_browser

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COMMAND = Path(sys.executable).parent / "rebalance-monitor"
GRAFANA = "https://grafana.example.com/ops"
RUNBOOKS = "https://wiki.example.com/rebalance/metrics.md"


def test_the_group_page_shows_a_live_double_assignments_queues_and_both_owners(tmp_path):
    require_browser()        # before the demo: without a browser there is nothing to check
    started = time.monotonic()
    # client-id-collision: two containers share one client id, so both take the first slot's
    # queues for the scenario's whole run.
    process = subprocess.Popen(
        [str(COMMAND), "demo", "--scenarios", "client-id-collision", "--duration-seconds", "600",
         "--metrics-port", "0", "--refresh-seconds", "5", "--dashboard-base-url", GRAFANA,
         "--runbook-base-url", RUNBOOKS],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    try:
        base = _base_url(process)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
        reader.start()
        group, doubled = _wait_for_double_assignment(base, process, started + 240)
        with headless_chromium(tmp_path) as driver:
            rows = _doubled_rows_in_browser(driver, base + group["page"], doubled,
                                            started + 300)
            links = {a.get_attribute("href") for a in driver.find_elements("css selector", "a")}
            opened, history = _open_doubles_in_history(driver, base, group, started + 360)
            screenshot = keep(driver, "group-page-double-assignment")
        assert screenshot.stat().st_size > 0
        # The demo's links: the group's Grafana dashboard, and the runbook of its finding.
        assert any(link.startswith(GRAFANA + "/d/") for link in links), links
        assert finding_runbook_url(RUNBOOKS, "double_assignment") in links, links
        for queue, owners in doubled.items():
            assert queue in rows, (queue, rows)
            # Both owners, each as its client id and its address (they share the client id).
            assert owners <= rows[queue], (queue, owners, rows[queue])
            assert len(owners) >= 2
        # The job started with the demo: its history holds each open double assignment from
        # its start, still open, as the API's open findings date it.
        assert opened and opened <= history, (opened, history)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def _base_url(process) -> str:
    for line in process.stdout:
        match = re.search(r"groups (http://\S+)/groups", line)
        if match:
            return match.group(1)
    raise AssertionError("the demo ended before announcing its group pages")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _wait_for_double_assignment(base: str, process, deadline: float) -> tuple[dict, dict]:
    """Poll the API until a group has an open double assignment: that group's list entry, and
    its double-assigned queues, each with its owners as the page writes them."""
    while time.monotonic() < deadline:
        assert process.poll() is None, "the demo ended"
        for group in _get(base + "/api/v1/groups")["groups"]:
            if "double_assignment" not in group["findings"]:
                continue
            detail = _get(base + group["url"])["detail"]
            doubled = {_queue_name(q): {_owner(o) for o in q["reported"] or q["rerun"]}
                       for q in (detail or {}).get("queues", ()) if q["double_assigned"]}
            if doubled:
                return group, doubled
        time.sleep(1)
    raise AssertionError("no double assignment in the demo's groups in time")


def _queue_name(queue: dict) -> str:
    return f"{queue['broker']}:{queue['queue_id']}" if queue["broker"] else \
        f"partition {queue['queue_id']}"


def _owner(owner: dict) -> str:
    return owner["client_id"] + (f" ({owner['address']})" if owner["address"] else "")


def _doubled_rows_in_browser(driver, url: str, expected: dict, deadline: float) -> dict:
    """Load the page until its marked rows hold the expected queues (the demo moves on while
    the browser starts): queue -> the owners listed in its row."""
    from selenium.webdriver.common.by import By

    rows: dict[str, set[str]] = {}
    while time.monotonic() < deadline:
        driver.get(url)
        rows = {}
        for row in driver.find_elements(By.CSS_SELECTOR, "table.queues tr.queue.double"):
            assert row.find_element(By.CSS_SELECTOR, "td.state").text == "double-assigned"
            queue = row.find_element(By.CSS_SELECTOR, "td.queue-id").text
            rows[queue] = {owner.text for owner in row.find_elements(By.CSS_SELECTOR,
                                                                     "li.owner")}
        if expected.keys() <= rows.keys():
            return rows
        time.sleep(1)
    return rows


def _utc(ms: int) -> str:
    """A time as the pages write it."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.") + \
        f"{ms % 1000:03d} UTC"


def _open_doubles_in_history(driver, base: str, group: dict, deadline: float):
    """Load the page until its history lists every double assignment the API says is open, by
    its start: (the starts of the open ones, the starts of the history's still open ones)."""
    from selenium.webdriver.common.by import By

    opened: set[str] = set()
    listed: set[str] = set()
    while time.monotonic() < deadline:
        findings = (_get(base + group["url"])["detail"] or {}).get("findings", ())
        opened = {_utc(f["since_ms"]) for f in findings if f["kind"] == "double_assignment"}
        driver.get(base + group["page"])
        heading = [h.text for h in driver.find_elements(By.TAG_NAME, "h2")]
        assert "Recent history" in heading, heading
        listed = {row.find_element(By.CSS_SELECTOR, "td.when").text
                  for row in driver.find_elements(
                      By.CSS_SELECTOR, "table.history tr.entry.finding.double_assignment")
                  if row.find_element(By.CSS_SELECTOR, "td.until").text == "still open"}
        if opened and opened <= listed:
            return opened, listed
        time.sleep(1)
    return opened, listed
