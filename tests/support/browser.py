"""Headless Chromium for page tests: Debian's chromium + chromedriver through selenium.

`chromium()` yields a driver with a fresh profile and browser/performance
logging on, or skips visibly when chromium, chromedriver or selenium is
missing (`apt-get install chromium chromium-driver`, `pip install selenium`);
under `.ci/run` (SESSIONSTORE_REQUIRE_BROWSER=1) it fails instead.
`problems()` lists console errors and every network request but the page's own.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


from tests.conftest import missing

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium driver (no downloads, throwaway profile), quit afterwards."""
    if not CHROMIUM.is_file() or not CHROMEDRIVER.is_file():
        missing("BROWSER", f"needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
    except ImportError:
        missing("BROWSER", "needs selenium (pip install selenium)")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="sessionstore-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (*ARGS, f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_page(driver: Any, path: Path) -> None:
    """Load a local file with the logs emptied first, so `problems` sees only this page."""
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(path.resolve().as_uri())


def requests(driver: Any, page: str) -> list[str]:
    """URLs that the document at `page` asked for since the last call (DevTools network events).

    Requests of other documents (the browser's own start page) are left out,
    and so is the navigation to the page itself.
    """
    urls = []
    for entry in driver.get_log("performance"):
        event = json.loads(entry["message"])["message"]
        if event.get("method") != "Network.requestWillBeSent":
            continue
        params = event["params"]
        url = params["request"]["url"]
        if _plain(params.get("documentURL", "")) == page and _plain(url) != page:
            urls.append(url)
    return urls


def problems(driver: Any) -> list[str]:
    """Console errors and warnings, resources the page loaded, and requests it sent."""
    page = _plain(driver.current_url)
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    return (
        errors + [f"resource loaded: {r}" for r in resources] + [f"request sent: {u}" for u in requests(driver, page)]
    )


def _plain(url: str) -> str:
    """A URL without its fragment (in-page navigation is not a request)."""
    return url.split("#", 1)[0]


def click_everything(driver: Any) -> tuple[int, int]:
    """Open every <summary> and click every link; returns (summaries, links) so tests can bound them."""
    toggles = driver.execute_script("return document.querySelectorAll('summary').length")
    links = driver.execute_script("return document.querySelectorAll('a').length")
    for i in range(toggles):
        driver.execute_script("document.querySelectorAll('summary')[arguments[0]].click()", i)
    for i in range(links):
        driver.execute_script("document.querySelectorAll('a')[arguments[0]].click()", i)
    return toggles, links
