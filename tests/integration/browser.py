"""A real headless browser for the tests: Debian's chromium, driven by Selenium through Debian's
chromedriver (system-deps installs both).

Selenium is given the driver's path, so it never runs Selenium Manager (which would download
one). The flags keep chromium off the network it would otherwise reach on its own (component
updates, sync, field trials, QUIC probes): the tests' machines are closed. Missing parts skip
the test locally and fail it in CI (CI=true), as the other tools' tests do.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,1000")
# Screenshots and pages the browser tests keep, under the gitignored build/.
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"


def require_browser() -> None:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (the test extra)")
    if missing:
        message = (f"{', '.join(missing)} not installed (Debian: chromium chromium-driver; "
                   "make system-deps)")
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@contextmanager
def headless_chromium(workdir: Path) -> Iterator:
    """A Selenium WebDriver over a new headless chromium with its own profile in workdir."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={workdir / 'chromium-profile'}"):
        options.add_argument(flag)
    service = Service(str(CHROMEDRIVER), log_output=str(workdir / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        driver.quit()


def keep(driver, name: str) -> Path:
    """A screenshot of the page (and its HTML beside it) under build/test-artifacts."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / f"{name}.png"
    # The whole page, not only the window (DevTools' capture beyond the viewport).
    width, height = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    (ARTIFACTS / f"{name}.html").write_text(driver.page_source)
    return screenshot
