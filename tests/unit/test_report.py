"""Report renderers, fed Measurement and Verdict objects built by hand."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from pytest_gpuperf import report
from pytest_gpuperf.report import ReportMeta, Row
from pytest_gpuperf.results import (
    FAIL,
    IMPROVED,
    MARGINAL,
    OTHER_DEVICE,
    PASS,
    REGRESSED,
    WITHIN_NOISE,
    BaselineRef,
    ClockReport,
    Measurement,
    Verdict,
)
from pytest_gpuperf.runtime.base import DeviceInfo, KernelResources

BYTES = 3 * 4 * 32 * 2**20
VECTOR_ADD = "tests/perf/test_vector_add.py::test_vector_add[32M]"
LONG_ID = (
    "tests/perf/test_copy.py::test_copy_with_a_long_parametrised_name"
    "[float32-1073741824-rotate-aligned-and-some-more-words]"
)
REF = BaselineRef(
    efficiency=0.80,
    efficiency_ci=(0.79, 0.81),
    run_spread=0.07,
    bandwidth_bps=4.24e12,
    time_s=95e-6,
    cache="cold",
    source="measured",
    provenance="measured 2025-01-02 on AMD Instinct MI300X",
    path="baselines/mi300x.toml",
)


def measurement(name="vector_add", time_s=105.7e-6, simulated=False, **changes) -> Measurement:
    fields = dict(
        name=name,
        kernel="vector_add",
        cache="cold",
        bytes_moved=BYTES,
        time_s=time_s,
        time_ci_s=(time_s * 0.995, time_s * 1.005),
        samples_s=tuple(time_s * (1 + 0.002 * i) for i in range(-7, 8)),
        peak_bps=5.3e12,
        device_key="mi300x",
        device_name="AMD Instinct MI300X",
        backend="sim" if simulated else "hip",
        simulated=simulated,
        queue_method="flush kernel",
        resources=KernelResources(registers=24, occupancy=0.5),
        grid=(131072, 1, 1),
        block=(256, 1, 1),
    )
    fields.update(changes)
    return Measurement(**fields)


REGRESSION_REASON = (
    "efficiency 71.9% is 10.2% below the baseline 80.0% | allowance 7.5%\n"
    "update with: pytest --gpuperf --gpuperf-save -k vector_add"
)


def rows(simulated=False) -> list[Row]:
    return [
        Row(
            VECTOR_ADD,
            measurement(simulated=simulated),
            Verdict(PASS, "71.9% >= floor 70%", floor=0.7, floor_status=PASS),
        ),
        Row(
            VECTOR_ADD,
            measurement("bypass", 97e-6, simulated=simulated, kernel="vector_add_bypass"),
            Verdict(
                FAIL,
                REGRESSION_REASON,
                baseline_status=REGRESSED,
                baseline=REF,
                delta=-0.102,
                allowance=0.075,
            ),
        ),
        Row(
            LONG_ID,
            measurement(
                "copy",
                1.2e-3,
                simulated=simulated,
                cache="rotate",
                clocks=ClockReport(throttled=True, throttle_reasons=("power cap",)),
            ),
            Verdict(MARGINAL, "undecided at the budget", floor=0.8, floor_status=MARGINAL),
        ),
        Row(
            "tests/perf/test_rms.py::test_rms",
            measurement("rms", 140e-6, simulated=simulated),
            Verdict(
                FAIL,
                "below the floor",
                floor=0.9,
                floor_status=FAIL,
                baseline_status=OTHER_DEVICE,
            ),
        ),
        Row(
            "tests/perf/test_rms.py::test_rms_fast",
            measurement("rms", 90e-6, simulated=simulated),
            Verdict(
                PASS,
                "faster",
                baseline_status=IMPROVED,
                baseline=REF,
                delta=0.05,
                notes=("faster than baseline: consider --gpuperf-save",),
            ),
        ),
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (3.3e-9, "3.300 ns"),
        (105.7e-6, "105.7 µs"),
        (97e-6, "97.00 µs"),
        (1.2e-3, "1.200 ms"),
        (2.5, "2.500 s"),
        (0.0, "0.000 ns"),
    ],
)
def test_format_time_picks_the_unit(seconds, text):
    assert report.format_time(seconds) == text


def test_summary_line_counts_and_names_failure_causes():
    assert report.summary_line(rows()) == ("2 passed, 2 failed (1 regression, 1 floor), 1 marginal")
    assert report.summary_line(rows()[:2]) == "1 passed, 1 failed (regression)"
    assert report.summary_line(rows()[:1]) == "1 passed"
    assert report.summary_line([]) == "no measurements"


def test_verdict_labels():
    labels = [report.verdict_label(row.verdict) for row in rows()]
    assert labels == ["pass", "FAIL regression", "marginal", "FAIL floor", "pass (improved)"]
    both = Verdict(FAIL, "x", floor_status=FAIL, baseline_status=REGRESSED)
    assert report.verdict_label(both) == "FAIL floor regression"


def test_short_test_ids_drop_only_what_is_shared():
    ids = ["tests/perf/a.py::test_x[1]", "tests/perf/b.py::test_y"]
    assert report.short_test_ids(ids) == {ids[0]: "test_x[1]", ids[1]: "test_y"}
    clash = ["tests/perf/a.py::test_x", "tests/perf/b.py::test_x"]
    assert report.short_test_ids(clash) == {clash[0]: "a.py::test_x", clash[1]: "b.py::test_x"}
    same_name = ["x/a.py::test_x", "y/a.py::test_x"]
    assert report.short_test_ids(same_name) == {i: i for i in same_name}


def test_ellipsize_keeps_the_parameters():
    text = "test_something_rather_long_indeed[32M-fp16]"
    short = report.ellipsize(text, 30)
    assert len(short) == 30
    assert short.endswith("[32M-fp16]")
    assert "…" in short
    assert report.ellipsize("short", 30) == "short"


def test_terminal_table_has_every_column_and_fits():
    table = report.terminal_table(rows())
    lines = table.splitlines()

    assert lines[0] == "gpuperf device: AMD Instinct MI300X [mi300x] via hip, peak 5.30 TB/s"
    assert report.SIMULATED_BANNER not in table
    assert max(len(line) for line in lines) <= report.TABLE_WIDTH
    header = lines[1].split()
    for column in ("test", "kernel", "mode", "GB/s", "efficiency", "baseline", "delta"):
        assert column in header
    assert "verdict" in header and "occupancy" in header

    regression = next(line for line in lines if "(bypass)" in line)
    assert "test_vector_add[32M] (bypass)" in regression  # two measurements: name added
    assert "97.00 µs ±0.5%" in regression
    assert f"{BYTES / 97e-6 / 1e9:,.0f}" in regression
    assert f"{BYTES / 97e-6 / 5.3e12:.1%}" in regression
    assert "80.0%" in regression and "-10.2%" in regression
    assert "FAIL regression" in regression and regression.endswith("50%")

    long_row = next(line for line in lines if "test_copy" in line)
    assert "…" in long_row and "rotate" in long_row and "!" in long_row
    assert "other dev" in next(line for line in lines if "test_rms " in line)
    assert any("clocks throttled" in line and "power cap" in line for line in lines)
    assert any("consider --gpuperf-save" in line for line in lines)
    assert lines[-1] == report.summary_line(rows())


def test_terminal_table_warns_when_simulated():
    table = report.terminal_table(rows(simulated=True))
    assert table.splitlines()[1] == "SIMULATED device — numbers are not measurements"
    assert "via sim" in table.splitlines()[0]


def test_terminal_table_without_rows():
    assert report.terminal_table([]) == "gpuperf: no measurements"


def test_markdown_table_summary_and_failure_reasons():
    text = report.markdown(rows(simulated=True))
    lines = text.splitlines()

    assert "> **SIMULATED device — numbers are not measurements**" in lines
    assert "**2 passed, 2 failed (1 regression, 1 floor), 1 marginal**" in lines
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + 5  # header, alignment, one line per row
    assert all(line.count(" | ") == table[0].count(" | ") for line in table[2:])
    assert "**FAIL regression**" in table[3]
    assert "±7.5%" in table[3]

    failures = text[text.index("#### Failures") : text.index("#### Marginal")]
    assert f"`{VECTOR_ADD}` (bypass)" in failures
    assert "  update with: pytest --gpuperf --gpuperf-save -k vector_add" in failures
    assert "below the floor" in failures
    assert "undecided at the budget" in text[text.index("#### Marginal") :]
    assert "clocks throttled" in text[text.index("#### Notes") :]


def test_markdown_escapes_pipes_in_cells():
    row = Row("t.py::test_x[a|b]", measurement(), Verdict(PASS, "ok"))
    table_line = next(
        line for line in report.markdown([row]).splitlines() if line.startswith("| `")
    )
    assert "a\\|b" in table_line


def test_github_step_summary_appends_only_when_set(tmp_path):
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(target)}

    assert report.append_github_step_summary("# one", env=env) == target
    report.append_github_step_summary("# two\n", env=env)
    assert target.read_text() == "earlier step\n# one\n# two\n"
    assert report.append_github_step_summary("# three", env={}) is None


def test_junit_properties():
    row = rows()[1]
    properties = dict(report.junit_properties(row.measurement, row.verdict))
    assert properties["gpuperf_efficiency"] == f"{BYTES / 97e-6 / 5.3e12:.6g}"
    assert properties["gpuperf_gbps"] == f"{BYTES / 97e-6 / 1e9:.6g}"
    assert properties["gpuperf_time_s"] == "9.7e-05"
    assert properties["gpuperf_cache"] == "cold"
    assert properties["gpuperf_device"] == "mi300x"
    assert properties["gpuperf_verdict"] == "fail"
    assert properties["gpuperf_baseline"] == "0.8"
    assert properties["gpuperf_baseline_status"] == "regressed"
    assert properties["gpuperf_delta"] == "-0.102"
    low, high = (float(x) for x in properties["gpuperf_ci"].split(","))
    assert low < float(properties["gpuperf_efficiency"]) < high
    assert "gpuperf_floor" not in properties
    assert "gpuperf_throttled" not in properties

    passing = rows()[0]
    named = dict(report.junit_properties(passing.measurement, passing.verdict, prefix="p"))
    assert named["p_floor"] == "0.7"
    assert "p_baseline" not in named


def test_json_report_carries_every_field_and_is_strict_json(tmp_path):
    extra = {"numpy_value": np.float32(1.5), "bad": math.nan, "arch": ("gfx942",)}
    data = rows()
    data[0] = dataclasses.replace(data[0], measurement=measurement(extra=extra))
    info = DeviceInfo(
        backend="hip",
        index=0,
        name="AMD Instinct MI300X",
        arch="gfx942",
        compute_units=304,
        l2_bytes=4 * 2**20,
        memory_bytes=192 * 2**30,
        warp_size=64,
        max_threads_per_block=1024,
        shared_bytes_per_block=65536,
        runtime_version="6.2.0",
    )
    meta = ReportMeta(device=info, commit="abc123", branch="main", command="pytest --gpuperf")
    document = report.to_json(data, meta)

    assert document["schema"] == "pytest-gpuperf-report"
    assert document["schema_version"] == report.REPORT_SCHEMA_VERSION
    assert document["commit"]["id"] == "abc123"
    assert document["devices"] == [
        {
            "key": "mi300x",
            "name": "AMD Instinct MI300X",
            "backend": "hip",
            "simulated": False,
            "peak_bps": 5.3e12,
            "arch": "gfx942",
            "compute_units": 304,
            "l2_bytes": 4 * 2**20,
            "memory_bytes": 192 * 2**30,
            "runtime_version": "6.2.0",
            "driver_version": "",
            "pci_bus_id": None,
        }
    ]
    assert document["summary"]["failed"] == 2
    first = document["results"][0]
    for field in dataclasses.fields(Measurement):
        assert field.name in first["measurement"]
    assert first["measurement"]["samples_s"] == list(data[0].measurement.samples_s)
    assert first["measurement"]["efficiency"] == data[0].measurement.efficiency
    assert first["measurement"]["resources"]["occupancy"] == 0.5
    assert first["measurement"]["extra"] == {"numpy_value": 1.5, "bad": None, "arch": ["gfx942"]}
    regression = document["results"][1]["verdict"]
    assert regression["baseline"]["efficiency"] == 0.80
    assert regression["baseline_status"] == REGRESSED
    assert regression["reason"] == REGRESSION_REASON

    path = report.write_json(tmp_path / "out" / "gpuperf.json", document)
    assert json.loads(path.read_text()) == document


def test_pytest_benchmark_stats_match_pytest_benchmark():
    stats_module = pytest.importorskip("pytest_benchmark.stats")
    rng = np.random.default_rng(1)
    for count in (1, 2, 7, 8, 9, 10, 11, 40):
        samples = list(rng.lognormal(-9, 0.1, count))
        theirs = stats_module.Stats()
        for sample in samples:
            theirs.update(sample)
        ours = report.benchmark_stats(samples)
        for name in stats_module.Stats.fields:
            if name == "hd15iqr":
                continue  # pytest-benchmark returns the first datum *beyond* the fence
            expected = getattr(theirs, name)
            if isinstance(expected, (int, float)) and not isinstance(expected, bool):
                assert ours[name] == pytest.approx(expected, rel=1e-12), (count, name)
            else:  # "outliers" is a string ("1;0"): pytest.approx refuses non-numbers
                assert ours[name] == expected, (count, name)
        within = [s for s in samples if s <= ours["q3"] + 1.5 * ours["iqr"]]
        assert ours["hd15iqr"] == max(within)


def test_pytest_benchmark_compare_reads_our_file(tmp_path):
    storage_module = pytest.importorskip("pytest_benchmark.storage.file")
    document = report.to_pytest_benchmark_json(rows(), ReportMeta(commit="abc123"))
    path = report.write_json(tmp_path / "0001_gpuperf.json", document)

    class Logger:
        def warning(self, text):
            raise AssertionError(text)

        info = warning

    storage = storage_module.FileStorage(tmp_path, logger=Logger())
    loaded = list(storage.load_benchmarks(str(path)))
    assert [b["fullname"] for b in loaded] == [
        f"{VECTOR_ADD}::vector_add",
        f"{VECTOR_ADD}::bypass",
        f"{LONG_ID}::copy",
        "tests/perf/test_rms.py::test_rms::rms",
        "tests/perf/test_rms.py::test_rms_fast::rms",
    ]
    assert loaded[1]["median"] == pytest.approx(97e-6)
    assert loaded[1]["extra_info"]["efficiency"] == pytest.approx(BYTES / 97e-6 / 5.3e12)
    assert loaded[0]["param"] == "32M"

    result = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "test_vector_add[32M]::bypass" in result.stdout
    assert "benchmark 'mi300x': 5 tests" in result.stdout


def test_within_noise_rows_show_their_baseline():
    row = Row(
        VECTOR_ADD,
        measurement(),
        Verdict(PASS, "ok", baseline_status=WITHIN_NOISE, baseline=REF, delta=-0.01),
    )
    line = report.terminal_table([row]).splitlines()[-2]
    assert "80.0%" in line and "-1.0%" in line and "pass" in line
