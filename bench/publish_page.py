"""The dashboard's size and load time over a generated history (not part of the plugin).

    python bench/publish_page.py [--measurements 100] [--runs 100] [--out DIR]

writes a baselines file and one JSON report per run, made by the plugin's own code (the
baseline schema's renderer, the gate's stored-baseline check, the JSON report), then the page
(`python -m pytest_gpuperf.publish`), and prints its size, how long publishing took and, where
headless Chromium and selenium are installed, how long the page takes to load and unpack its
plots. The history is generated, so everything in it is labelled simulated (device key
`h100-sxm-sim`): a level per measurement, run-to-run noise of 0.3% on two boards, some
measurements regressing 5% in the last tenth of the runs (some of those accepted), some with
replaced baselines that drift.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.dashboard_history import make_history


def load_time_s(page: Path) -> float | None:
    """Seconds from navigation start until the page has unpacked and placed every plot, in
    headless Chromium (None where chromium, chromedriver or selenium is missing)."""
    from tests.chromium import chromium, missing

    if missing():
        return None
    with chromium() as driver:
        driver.get(page.resolve().as_uri())
        wait_ready(driver)
        return float(driver.execute_script("return window.gpuperfReadyMs")) / 1000.0


def wait_ready(driver, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while driver.find_element("tag name", "body").get_attribute("data-ready") == "no":
        if time.monotonic() > deadline:
            raise TimeoutError("the page did not unpack its plots")
        time.sleep(0.02)


def screenshot(page: Path, png: Path, plot: str = "", point: int = 22) -> Path:
    """The top of the page and, below it, one measurement's plot (`plot`: its section id,
    `plot-m3`; default the first regressed one, else the first) with point `point`'s tooltip
    shown: the picture in docs/ci.md."""
    import io

    from PIL import Image
    from selenium.webdriver.common.action_chains import ActionChains

    from tests.chromium import chromium

    with chromium(1240, 1040) as driver:
        driver.get(page.resolve().as_uri())
        wait_ready(driver)
        top = Image.open(io.BytesIO(driver.get_screenshot_as_png()))
        if not plot:
            regressed = driver.find_elements("css selector", "section.plot .s-regressed")
            first = regressed[0] if regressed else driver.find_element("css selector", "h3")
            plot = first.find_element("xpath", "ancestor::section[1]").get_attribute("id")
        driver.execute_script(f"document.getElementById({plot!r}).scrollIntoView()")
        driver.execute_script("window.scrollBy(0, -8)")
        marks = driver.find_elements("css selector", f"#{plot} [data-gid]")
        ActionChains(driver).move_to_element(marks[min(point, len(marks) - 1)]).perform()
        time.sleep(0.3)
        below = Image.open(io.BytesIO(driver.get_screenshot_as_png()))
        tip = driver.find_element("id", "tip")
        scrolled = driver.execute_script("return window.scrollY")
        height = driver.find_element("id", plot).size["height"] + 16
        if tip.is_displayed():
            height = max(height, tip.location["y"] - scrolled + tip.size["height"] + 10)
    below = below.crop((0, 0, below.size[0], min(height, below.size[1])))
    canvas = Image.new("RGB", (top.size[0], top.size[1] + below.size[1] + 6), (247, 248, 250))
    canvas.paste(top, (0, 0))
    canvas.paste(Image.new("RGB", (top.size[0], 2), (200, 205, 212)), (0, top.size[1] + 2))
    canvas.paste(below, (0, top.size[1] + 6))
    canvas.save(png, optimize=True)
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--measurements", type=int, default=100)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("/tmp/gpuperf-publish-bench"))
    parser.add_argument(
        "--page", type=Path, help="measure this page instead of generating a history"
    )
    parser.add_argument("--screenshot", type=Path, help="also write a screenshot (PNG) here")
    parser.add_argument("--plot", default="", help="the plot the screenshot shows (plot-m3)")
    options = parser.parse_args(argv)
    page = options.page
    if page is None:
        started = time.perf_counter()
        baseline, reports = make_history(options.out, options.measurements, options.runs)
        made_s = time.perf_counter() - started
        from pytest_gpuperf.commands.publish.__main__ import publish

        page = options.out / "dashboard.html"
        started = time.perf_counter()
        publish([baseline, *reports], page)
        publish_s = time.perf_counter() - started
        print(
            f"history: {options.measurements} measurements x {options.runs} runs, "
            f"generated in {made_s:.1f} s; published in {publish_s:.1f} s"
        )
    size = page.stat().st_size
    print(f"page: {page} {size:,} bytes ({size / 1e6:.2f} MB)")
    loads = [load_time_s(page) for _ in range(3)]
    if loads[0] is None:
        print("load time: not measured (no chromium, chromedriver or selenium here)")
    else:
        shown = ", ".join(f"{t:.2f}" for t in loads if t is not None)
        print(f"load in headless Chromium (navigation to plots placed), 3 loads: {shown} s")
    if options.screenshot:
        print(f"screenshot: {screenshot(page, options.screenshot, options.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
