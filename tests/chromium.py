"""Headless Chromium for the dashboard's tests, driven by selenium through Debian's
chromedriver (`apt-get install chromium chromium-driver`; selenium from the [test] extra).
Nothing is downloaded: the browser and its driver are the system's, named by path, so
selenium's own driver manager never runs."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator

CHROMIUM, CHROMEDRIVER = "chromium", "chromedriver"
INSTALL = "apt-get install chromium chromium-driver; pip install -e '.[test]' (selenium)"
# Flags that work in a container as root with no network: no sandbox (root), no GPU, nothing
# in the background that would reach out (updates, sync, QUIC).
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)


def missing() -> str | None:
    """What is missing for the browser tests (None: they can run)."""
    for program in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(program) is None:
            return f"{program} is not on PATH"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package does not import"
    return None


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator:
    """A selenium driver of a fresh headless Chromium (its own profile folder, removed after),
    with the page's console kept (`driver.get_log("browser")`)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which(CHROMIUM) or CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with tempfile.TemporaryDirectory(prefix="gpuperf-chromium-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        service = Service(executable_path=shutil.which(CHROMEDRIVER) or CHROMEDRIVER)
        driver = webdriver.Chrome(options=options, service=service)
        try:
            driver.set_window_size(width, height)
            yield driver
        finally:
            driver.quit()
