"""docs/devices.md's table of the supported devices is runtime/devices.py's: one row per
device of KNOWN_DEVICES, in its order, with its peak bandwidth, caches and the source it
cites, so the page cannot drift from what the plugin measures against. When the table in the
code changes, the failure prints the rows to paste."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_gpuperf.runtime.devices import KNOWN_DEVICES, DeviceSpec, GiB, MiB

PAGE = Path(__file__).resolve().parents[2] / "docs" / "devices.md"
HEADER = (
    "| key | device | arch | CUs / SMs | L2 | last-level cache | peak bandwidth | memory | source |"
)


def _tb(bps: float) -> str:
    return f"{bps / 1e12:g} TB/s"


def row(spec: DeviceSpec) -> str:
    """The page's row for one device, from its spec alone."""
    cells = [
        f"`{spec.key}`",
        spec.name,
        spec.arch,
        str(spec.compute_units),
        f"{spec.l2_bytes // MiB} MiB",
        f"{spec.llc_bytes // MiB} MiB" if spec.llc_bytes else "none",
        _tb(spec.peak_bps),
        f"{spec.memory_bytes // GiB} GiB",
        spec.source,
    ]
    return "| " + " | ".join(cells) + " |"


def page_rows() -> list[str]:
    """The rows of the page's device table, in its order."""
    text = PAGE.read_text(encoding="utf-8")
    assert HEADER in text, f"{PAGE.name}: the table's header is not {HEADER!r}"
    table = text.split(HEADER, 1)[1].split("\n\n", 1)[0]
    return [line for line in table.splitlines()[2:] if line.startswith("|")]


def test_the_page_lists_every_known_device_as_the_code_has_it():
    expected = [row(spec) for spec in KNOWN_DEVICES.values()]
    assert page_rows() == expected, "docs/devices.md's rows should read:\n" + "\n".join(expected)


def test_a_changed_peak_is_caught():
    """The check reads the figures: a peak edited in the code (or on the page) differs."""
    spec = KNOWN_DEVICES["mi300x"]
    edited = row(spec).replace("| 5.3 TB/s |", "| 5.2 TB/s |")
    assert edited != row(spec) and row(spec) in page_rows() and edited not in page_rows()


def test_the_readme_and_the_ci_page_point_to_it():
    docs = Path(__file__).resolve().parents[2]
    for page in ("README.md", "docs/ci.md"):
        assert re.search(r"docs/devices\.md|\(devices\.md\)", (docs / page).read_text()), page
