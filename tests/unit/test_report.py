"""Renderers: terminal table (full ids at 80 columns, notes once), Markdown, JUnit properties,
our JSON, pytest-benchmark's layout. The rows' verdicts come from the gate itself."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from pytest_gpuperf import report
from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.engine.results import ClockReport, Measurement, PairedComparison
from pytest_gpuperf.gate.ab import check_comparison
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.gate.floor import check_floor
from pytest_gpuperf.gate.stored import check_baseline
from pytest_gpuperf.record import json_report, report_reader
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.verdict import Row
from pytest_gpuperf.runtime.info import DeviceInfo, KernelResources
from tests import records

BYTES = 3 * 4 * 32 * 2**20
VECTOR_ADD = "tests/perf/test_vector_add.py::test_vector_add[32M]"
LONG_ID = (
    "tests/perf/test_copy.py::test_copy_with_a_long_parametrised_name"
    "[float32-1073741824-rotate-aligned-and-some-more-words]"
)
UPDATE = "pytest --gpuperf --gpuperf-save tests/perf/test_vector_add.py::test_vector_add[32M]"


def ref(efficiency: float = 0.80, **changes) -> BaselineRef:
    fields = dict(
        efficiency=efficiency,
        efficiency_ci=(efficiency * 0.99, efficiency * 1.01),
        run_spread=0.07,
        bandwidth_bps=efficiency * 5.3e12,
        time_s=95e-6,
        cache="cold",
        source="measured",
        provenance="measured 2025-01-02 on AMD Instinct MI300X",
        path="baselines/mi300x.toml",
        device_key="mi300x",
    )
    fields.update(changes)
    return BaselineRef(**fields)


def measurement(name="vector_add", time_s=105.7e-6, simulated=False, **changes) -> Measurement:
    fields = dict(
        name=name,
        kernel="vector_add",
        samples_s=tuple(time_s * (1 + 0.002 * i) for i in range(-7, 8)),
        backend="sim" if simulated else "hip",
        simulated=simulated,
        resources=KernelResources(registers=24, occupancy=0.5),
        grid=(131072, 1, 1),
        block=(256, 1, 1),
        fingerprint="sha256:1",
    )
    built = records.measurement(time_s=time_s, bytes_moved=BYTES, rel_ci=0.005, **fields)
    return dataclasses.replace(built, **changes) if changes else built


def row(test_id: str, m: Measurement, *, floor=None, baseline=None, elsewhere=(), **kwargs) -> Row:
    check = check_baseline(
        m, baseline, tolerance=0.01, elsewhere=elsewhere, gating=kwargs.pop("gating", True)
    )
    verdict = decide(
        baseline=check,
        floor=check_floor(m, floor) if floor is not None else None,
        update_command=UPDATE,
        **kwargs,
    )
    return Row(test_id, m, verdict, test_outcome="failed" if verdict.status == "fail" else "passed")


def rows(simulated=False) -> list[Row]:
    return [
        row(VECTOR_ADD, measurement(simulated=simulated), floor=0.7),
        row(
            VECTOR_ADD,
            measurement("bypass", 120e-6, simulated=simulated, kernel="vector_add_bypass"),
            baseline=ref(0.80, run_spread=0.004, saves=5, spread_basis="history"),
        ),
        row(
            LONG_ID,
            measurement(
                "copy",
                1.2e-3,
                simulated=simulated,
                cache="rotate",
                time_ci_s=(1.19e-3, 1.216e-3),
                bytes_moved=int(0.8 * 5.3e12 * 1.2e-3),
                clocks=ClockReport(throttled=True, throttle_reasons=("power cap",)),
            ),
            floor=0.8,
        ),
        row(
            "tests/perf/test_rms.py::test_rms",
            measurement("rms", 140e-6, simulated=simulated),
            floor=0.9,
            elsewhere=("h100-sxm",),
        ),
        row(
            "tests/perf/test_rms.py::test_rms_fast",
            measurement("rms", 90e-6, simulated=simulated),
            baseline=ref(0.80, run_spread=0.004, saves=5, spread_basis="history"),
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


def test_statuses_of_the_sample_rows():
    assert [r.verdict.status for r in rows()] == ["pass", "fail", "marginal", "fail", "pass"]


def test_summary_line_counts_in_words_that_do_not_collide_with_pytests():
    assert report.summary_line(rows()) == (
        "5 measurements in 4 tests: 2 ok, 2 failed (1 regression, 1 floor), 1 marginal"
    )
    assert (
        report.summary_line(rows()[:2]) == "2 measurements in 1 test: 1 ok, 1 failed (regression)"
    )
    assert report.summary_line([]) == "no measurements"


def test_verdict_labels():
    labels = [report.verdict_label(r.verdict) for r in rows()]
    assert labels == ["pass", "FAIL regression", "marginal", "FAIL floor", "pass (improved)"]


def test_terminal_table_fits_a_wide_terminal_on_one_line_per_row():
    table = report.terminal_table(rows()[:2], width=200)
    lines = table.splitlines()
    assert lines[0] == "gpuperf device: AMD Instinct MI300X [mi300x] via hip, peak 5.30 TB/s"
    header = lines[1].split()
    for column in ("test", "kernel", "mode", "GB/s", "efficiency", "baseline", "delta"):
        assert column in header
    assert "verdict" in header and "allowance" in header and "floor" in header
    regression = next(line for line in lines if "(bypass)" in line)
    assert f"{VECTOR_ADD} (bypass)" in regression  # the full id
    assert "FAIL regression" in regression and "80.0%" in regression


def test_terminal_table_at_80_columns_never_cuts_a_test_id():
    table = report.terminal_table(rows(), width=80)
    lines = table.splitlines()
    assert f"  {LONG_ID}" in lines  # a line of its own, whole
    assert VECTOR_ADD in "\n".join(lines)
    body = [line for line in lines if line.startswith("    ")]
    assert all(len(line) <= 80 for line in body)
    assert "…" not in table
    # the two measurements of one test stay apart by name
    assert any(line.strip().startswith("vector_add") for line in body)
    assert any(line.strip().startswith("bypass") for line in body)
    assert any(line.startswith("! ") and VECTOR_ADD in line for line in lines)  # failed test


def test_each_distinct_note_is_printed_once():
    many = [row(f"t.py::test_{i}", measurement()) for i in range(17)]
    table = report.terminal_table(many, width=80, update_command=lambda *t: "CMD " + " ".join(t))
    assert table.count("have no baseline") == 1
    assert "17 of 17 measurements have no baseline for mi300x" in table
    assert "record them with: CMD t.py" in table
    elsewhere = [row(f"t.py::test_{i}", measurement(), elsewhere=("h100-sxm",)) for i in range(5)]
    assert report.terminal_table(elsewhere).count("other devices only: h100-sxm") == 1


def test_terminal_table_warns_when_simulated():
    table = report.terminal_table(rows(simulated=True))
    assert table.splitlines()[1] == "SIMULATED device — numbers are not measurements"
    assert "via sim" in table.splitlines()[0]


def test_terminal_table_without_rows():
    assert report.terminal_table([]) == "gpuperf: no measurements"


def test_rows_of_failed_tests_are_kept_and_marked():
    failed = row("t.py::test_x", measurement(), unjudged=True)
    failed = dataclasses.replace(failed, test_outcome="failed")
    table = report.terminal_table([failed], width=120)
    assert "not judged (test failed)" in table
    assert "1 not judged (their test failed)" in table


def test_ab_columns_and_words():
    head = measurement(time_s=103e-6)
    pair = PairedComparison(
        head=head, base=measurement(time_s=100e-6), ratio=1.03, ratio_ci=(1.028, 1.032), pairs=80
    )
    comparison = check_comparison(
        pair, ref="origin/main", ref_commit="abcdef123456", threshold=0.005
    )
    ab_row = row(VECTOR_ADD, head, comparison=comparison, gating=False, baseline=ref(0.9))
    table = report.terminal_table([ab_row], width=160)
    assert "A/B" in table and "+3.0% slower" in table and "FAIL A/B" in table
    assert "80.0%" not in table and "90.0%*" in table  # shown, not gated
    text = report.markdown(
        [ab_row], ReportMeta(compare_ref="origin/main", compare_commit="abcdef123456")
    )
    assert "A/B against `origin/main` (abcdef123456)" in text
    properties = dict(report.junit_properties(ab_row.measurement, ab_row.verdict))
    assert properties["gpuperf_ab_state"] == "regressed"
    assert properties["gpuperf_ab_ratio"] == "1.03"


def test_markdown_table_summary_and_failure_reasons():
    text = report.markdown(rows(simulated=True))
    lines = text.splitlines()
    assert lines[0] == "<!-- pytest-gpuperf -->"  # the CI recipe updates this comment in place
    assert "> **SIMULATED device — numbers are not measurements**" in lines
    assert (
        "**5 measurements in 4 tests: 2 ok, 2 failed (1 regression, 1 floor), 1 marginal**" in lines
    )
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + 5
    assert all(line.count(" | ") == table[0].count(" | ") for line in table[2:])
    assert "**FAIL regression**" in table[3]
    failures = text[text.index("#### Failures") : text.index("#### Marginal")]
    assert f"`{VECTOR_ADD}` (bypass)" in failures
    assert f"update:     {UPDATE}" in failures
    assert "below the floor" in failures
    assert "straddles the floor" in text[text.index("#### Marginal") :]
    assert "clocks throttled" in text[text.index("#### Notes") :]


def test_markdown_escapes_pipes_and_newlines_in_ids():
    odd = row("t.py::test_x[a|b\nc]", measurement())
    table_line = next(
        line for line in report.markdown([odd]).splitlines() if line.startswith("| `")
    )
    assert "a\\|b c" in table_line


def test_github_step_summary_appends_only_when_set(tmp_path):
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(target)}
    assert report.append_github_step_summary("# one", env=env) == target
    report.append_github_step_summary("# two\n", env=env)
    assert target.read_text() == "earlier step\n# one\n# two\n"
    assert report.append_github_step_summary("# three", env={}) is None


def test_junit_properties():
    regression = rows()[1]
    properties = dict(report.junit_properties(regression.measurement, regression.verdict))
    assert properties["gpuperf_efficiency"] == f"{BYTES / 120e-6 / 5.3e12:.6g}"
    assert properties["gpuperf_time_s"] == "0.00012"
    assert properties["gpuperf_verdict"] == "fail"
    assert properties["gpuperf_baseline"] == "0.8"
    assert properties["gpuperf_baseline_status"] == "regressed"
    assert properties["gpuperf_fingerprint"] == "sha256:1"
    assert "gpuperf_floor" not in properties
    passing = rows()[0]
    named = dict(report.junit_properties(passing.measurement, passing.verdict, prefix="p"))
    assert named["p_floor"] == "0.7"
    assert "p_baseline" not in named


def test_json_report_carries_every_field_reads_back_and_is_strict_json(tmp_path):
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
    assert document["schema_version"] == 4
    assert document["devices"][0]["arch"] == "gfx942"
    assert document["summary"]["failed"] == 2 and document["summary"]["tests"] == 4
    first = document["results"][0]
    for field in dataclasses.fields(Measurement):
        assert field.name in first["measurement"]
    assert first["measurement"]["extra"] == {"numpy_value": 1.5, "bad": None, "arch": ["gfx942"]}
    regression = document["results"][1]["verdict"]
    assert regression["baseline"]["outcome"] == "regressed"
    assert regression["baseline"]["baseline"]["efficiency"] == 0.80
    assert document["results"][1]["test_outcome"] == "failed"

    path = json_report.write_json(tmp_path / "out" / "gpuperf.json", document)
    loaded = json.loads(path.read_text())
    assert loaded == document
    back = report_reader.rows_from_json(loaded)
    assert [r.verdict for r in back[1:]] == [r.verdict for r in data[1:]]
    assert [r.measurement for r in back[1:]] == [r.measurement for r in data[1:]]


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
    path = json_report.write_json(tmp_path / "0001_gpuperf.json", document)

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
    assert loaded[1]["median"] == pytest.approx(120e-6)
    assert loaded[1]["extra_info"]["efficiency"] == pytest.approx(BYTES / 120e-6 / 5.3e12)
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
