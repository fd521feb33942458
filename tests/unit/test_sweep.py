"""bench/sweep.py on the simulated MI300X at small sizes: rows, table, JSON, Markdown, plot."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.runtime.devices import get_device
from tests.bench_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
KiB, MiB = 2**10, 2**20


sweep = load_script("sweep")


@pytest.fixture(scope="module")
def result():
    backend = open_backend("sim", device="mi300x", seed=3)
    try:
        return sweep.run_sweep(
            backend,
            get_device("mi300x"),
            kernels=["copy", "vector_add"],
            caches=["hot", "cold"],
            sizes=[4 * KiB, 64 * KiB, 1 * MiB],
            measure_budget_s=0.01,
            wall_budget_s=120.0,
            log=lambda line: None,
        )
    finally:
        backend.close()


def test_sizes_are_the_seeds_powers_of_two():
    assert sweep.sizes_between(4 * KiB, 2 * 2**30) == [2**p for p in range(12, 32)]
    assert sweep.sizes_between(5000, 16 * KiB) == [8 * KiB, 16 * KiB]  # rounded up to 2^k
    with pytest.raises(ValueError, match="min-bytes"):
        sweep.sizes_between(16 * KiB, 4 * KiB)


def test_every_size_kernel_and_mode_is_measured_and_checked(result):
    assert result.simulated and result.device_key == "mi300x" and result.backend == "sim"
    assert result.peak_bps == 5.3e12
    assert not result.skipped
    assert len(result.rows) == 3 * 2 * 2
    buffers = {"copy": 2, "vector_add": 3}
    for row in result.rows:
        assert row.bytes_moved == buffers[row.kernel] * row.size_bytes
        assert row.bandwidth_bps == pytest.approx(row.bytes_moved / row.time_s)
        assert row.efficiency == pytest.approx(row.bandwidth_bps / result.peak_bps)
        assert row.output_checked
        assert row.time_ci_s[0] <= row.time_s <= row.time_ci_s[1]


def test_the_curve_has_the_seeds_shape(result):
    """Launch-bound at 4 KB, far better at 1 MB; hot beats cold once the data is worth
    caching (the simulated caches hold all of a 3 MiB working set)."""
    rows = {(r.kernel, r.cache, r.size_bytes): r for r in result.rows}
    for kernel in ("copy", "vector_add"):
        small, large = rows[kernel, "cold", 4 * KiB], rows[kernel, "cold", 1 * MiB]
        assert small.efficiency < 0.01 and large.efficiency > 10 * small.efficiency
        assert rows[kernel, "hot", 1 * MiB].time_s < large.time_s


def test_text_and_markdown_say_simulated(result):
    text = sweep.render_text(result)
    assert text.splitlines()[0].startswith("Bandwidth sweep on SIMULATED AMD Instinct MI300X")
    assert "*** SIMULATED" in text
    for header in ("size (B/buffer)", "bytes moved", "GB/s", "efficiency"):
        assert header in text
    markdown = sweep.render_markdown(result)
    assert "**SIMULATED**" in markdown and "| kernel | cache |" in markdown
    assert markdown.count("\n| copy |") + markdown.count("\n| vector_add |") == 12


def test_json_holds_every_row(result, tmp_path):
    path = tmp_path / "sweep.json"
    sweep.write_json(str(path), sweep.to_json(result))
    data = json.loads(path.read_text())
    assert data["simulated"] is True and "SIMULATED" in data["title"]
    assert len(data["rows"]) == 12
    assert {"size_bytes", "bytes_moved", "time_s", "gbps", "efficiency"} <= set(data["rows"][0])
    assert sweep.from_json(data) == result  # --from-json re-renders without measuring


def test_plot_is_log_log_bytes_with_the_roofline_and_a_simulated_title(result, tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    path = tmp_path / "sweep.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # keep text as text
        sweep.plot(result, path)
    svg = path.read_text()
    assert "SIMULATED AMD Instinct MI300X" in svg and result.date in svg
    assert "roofline: 5300 GB/s" in svg
    assert "bytes" in svg and "GB/s" in svg
    png = tmp_path / "sweep.png"
    sweep.plot(result, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_how_to_get_it(result, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(SystemExit, match=r"matplotlib.*pip install"):
        sweep.plot(result, tmp_path / "sweep.png")


def test_a_spent_budget_skips_and_lists_instead_of_dropping():
    backend = open_backend("sim", device="mi300x", seed=3)
    try:
        result = sweep.run_sweep(
            backend,
            get_device("mi300x"),
            kernels=["copy"],
            caches=["cold", "hot"],
            sizes=[4 * KiB, 8 * KiB],
            measure_budget_s=0.01,
            wall_budget_s=0.0,
            log=lambda line: None,
        )
    finally:
        backend.close()
    assert not result.rows
    assert len(result.skipped) == 4
    assert sweep.skipped_lines(result) == [
        "copy cold at 4 KB .. 8 KB: wall budget spent",
        "copy hot at 4 KB .. 8 KB: wall budget spent",
    ]


def test_command_line_writes_json_markdown_and_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    markdown = tmp_path / "sweep.md"
    markdown.write_text("# Sweep\n\nKept text.\n")
    code = sweep.main(
        [
            "--backend=sim",
            "--seed=5",
            "--kernels=copy",
            "--cache=cold",
            "--max-bytes=8K",
            "--measure-budget=0.01",
            f"--out={tmp_path / 'sweep.json'}",
            f"--plot={tmp_path / 'sweep.png'}",
            f"--markdown={markdown}",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "SIMULATED" in printed and "plot:" in printed
    assert len(json.loads((tmp_path / "sweep.json").read_text())["rows"]) == 2
    assert (tmp_path / "sweep.png").stat().st_size > 0
    text = markdown.read_text()
    assert text.startswith("# Sweep\n\nKept text.\n")
    assert "<!-- sweep-sim-mi300x:begin -->" in text and "**SIMULATED**" in text
    assert "Command: `python bench/sweep.py --backend=sim --seed=5" in text


def test_command_line_refuses_a_plot_format_it_cannot_write(tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        sweep.main(["--backend=sim", f"--plot={tmp_path / 'sweep.pdf'}"])
    assert exit_info.value.code == 2
