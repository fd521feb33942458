"""The dashboard in a real browser: Debian's headless Chromium, driven by selenium through
chromedriver, opens the page from file:// with no network. No console error, one plot per
measurement, the search box filters the grid and the plots, and a point's tooltip names its
commit, date and run. Skips (naming what is missing) without chromium, chromium-driver or
selenium, except under GPUPERF_REQUIRE_TOOLCHAINS (CI), where that is a failure."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_gpuperf.commands.publish.__main__ import main
from tests.dashboard_history import make_history
from tests.toolchains import need

# End to end through separate processes: the slow tier (`-m slow`; CI runs it).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def driver():
    need("chromium")
    from tests.chromium import chromium

    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, list[Path]]:
    """A page of 12 measurements over 20 runs on two boards (tests/dashboard_history.py)."""
    folder = tmp_path_factory.mktemp("dashboard")
    baseline, reports = make_history(folder, measurements=12, runs=20)
    out = folder / "dashboard.html"
    assert main([str(baseline), *map(str, reports), "-o", str(out)]) == 0
    return out, reports


def opened(driver, path: Path) -> None:
    """Open `path` from the file system and wait until its script has placed the plots."""
    driver.get(path.resolve().as_uri())
    deadline = time.monotonic() + 60
    while (ready := driver.find_element("tag name", "body").get_attribute("data-ready")) == "no":
        assert time.monotonic() < deadline, "the page did not unpack its plots in 60 s"
        time.sleep(0.05)
    assert ready == "yes"


def errors(driver) -> list[dict]:
    """The console's errors and warnings since the last call (a failed load is SEVERE)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]


def visible(driver, css: str) -> list:
    return [
        element for element in driver.find_elements("css selector", css) if element.is_displayed()
    ]


def test_the_page_opens_from_the_file_system_with_one_plot_per_measurement(driver, page):
    path, _ = page
    opened(driver, path)

    assert errors(driver) == []
    sections = driver.find_elements("css selector", "section.plot")
    assert len(sections) == 12
    for section in sections:
        svgs = section.find_elements("css selector", ".svg > svg")
        assert len(svgs) == 1
        assert svgs[0].size["width"] > 300 and svgs[0].size["height"] > 80
        # 20 runs and 3 saves, each a point with a tooltip
        assert len(section.find_elements("css selector", "[data-gid]")) >= 23
    assert len(driver.find_elements("css selector", "tr.m")) == 12
    assert driver.find_element("id", "unpack-note").is_displayed() is False


def test_the_search_box_filters_the_grid_and_the_plots(driver, page):
    path, _ = page
    opened(driver, path)
    search = driver.find_element("id", "search")

    search.send_keys("k003")
    assert [row.get_attribute("data-sid") for row in visible(driver, "tr.m")] == ["m3"]
    assert [s.get_attribute("id") for s in visible(driver, "section.plot")] == ["plot-m3"]
    # the other test file's group heading goes with its rows
    assert len(visible(driver, "tbody.group")) == 1

    search.clear()
    search.send_keys("accepted")
    assert [row.get_attribute("data-sid") for row in visible(driver, "tr.m")] == ["m3"]

    no_match = driver.find_element("id", "no-match")
    assert not no_match.is_displayed()
    search.clear()
    search.send_keys("no-such-kernel")  # nothing matches: the page says so
    assert visible(driver, "tr.m") == [] and visible(driver, "section.plot") == []
    assert no_match.is_displayed() and "No measurement matches" in no_match.text

    search.clear()
    search.send_keys(" ")  # blank: everything again
    assert len(visible(driver, "tr.m")) == 12
    assert not no_match.is_displayed()
    assert errors(driver) == []


def test_a_points_tooltip_names_its_commit_date_and_run(driver, page):
    from selenium.webdriver.common.action_chains import ActionChains

    path, reports = page
    opened(driver, path)
    newest = json.loads(reports[-1].read_text())
    driver.execute_script("document.getElementById('plot-m0').scrollIntoView()")
    points = driver.find_elements("css selector", "#plot-m0 [data-gid]")
    tip = driver.find_element("id", "tip")
    assert not tip.is_displayed()

    texts = []
    for point in points:
        ActionChains(driver).move_to_element(point).perform()
        if tip.is_displayed():
            texts.append(tip.text)
    run_tip = next(text for text in texts if reports[-1].name in text)

    assert f"commit {newest['commit']['id'][:12]}" in run_tip
    assert newest["created"] in run_tip
    assert f"run {len(reports)} of {len(reports)}" in run_tip
    assert any(text.startswith("save of the baseline") for text in texts)
    assert errors(driver) == []


def test_the_page_of_the_shipped_h100_baselines_opens(driver, tmp_path):
    out = tmp_path / "h100.html"
    assert main([str(REPO / "baselines" / "h100-sxm.toml"), "-o", str(out)]) == 0

    opened(driver, out)

    assert errors(driver) == []
    assert len(driver.find_elements("css selector", "section.plot .svg > svg")) == 19
