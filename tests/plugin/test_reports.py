"""What a run leaves behind: JUnit properties, JSON, Markdown, the job summary."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree

# The floor names the cold measurement: a floor on a hot one is warned about (cache bandwidth
# against the HBM peak), and these tests are about what the reports hold.
TWO_MEASUREMENTS = """
@pytest.mark.min_bw(0.3, cache="cold")
def test_add(gpu_bench):
    add(gpu_bench, name="cold")
    add(gpu_bench, name="hot", cache="hot")

@pytest.mark.min_bw(0.99)
def test_slow(gpu_bench):
    add(gpu_bench)
"""


def test_junit_xml_carries_the_measurements_as_properties(gp):
    gp.test_file(TWO_MEASUREMENTS)
    gp.run("--gpuperf", "--junitxml=junit.xml").assert_outcomes(passed=1, failed=1)
    cases = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ElementTree.parse(gp.path / "junit.xml").getroot().iter("testcase")
    }
    add, slow = cases["test_add"], cases["test_slow"]
    assert add["gpuperf.cold_cache"] == "cold" and add["gpuperf.hot_cache"] == "hot"
    assert add["gpuperf.cold_device"] == "mi300x" and add["gpuperf.cold_simulated"] == "true"
    assert 0.3 < float(add["gpuperf.cold_efficiency"]) < 0.6
    assert add["gpuperf.cold_verdict"] == "pass" and add["gpuperf.cold_floor"] == "0.3"
    assert "gpuperf.hot_floor" not in add  # min_bw(cache="cold") leaves the hot one alone
    # a test failed by its gate still reports what was measured
    assert slow["gpuperf_verdict"] == "fail" and slow["gpuperf_floor"] == "0.99"
    assert float(slow["gpuperf_gbps"]) > 0


def test_json_report_holds_every_measurement_and_verdict(gp):
    gp.test_file(TWO_MEASUREMENTS)
    gp.run("--gpuperf", "--gpuperf-json=out/report.json").assert_outcomes(passed=1, failed=1)
    report = json.loads((gp.path / "out" / "report.json").read_text())
    assert report["schema"] == "pytest-gpuperf-report" and report["schema_version"] == 4
    assert report["simulated"] is True
    summary = report["summary"]
    assert summary["passed"] == 2 and summary["failed"] == 1 and summary["tests"] == 2
    assert summary["line"] == "3 measurements in 2 tests: 2 ok, 1 failed (floor)"
    rows = {(r["test_id"], r["measurement"]["name"]): r for r in report["results"]}
    assert set(rows) == {
        ("test_perf.py::test_add", "cold"),
        ("test_perf.py::test_add", "hot"),
        ("test_perf.py::test_slow", "vector_add"),
    }
    cold = rows["test_perf.py::test_add", "cold"]
    assert cold["measurement"]["bytes_moved"] == 3 * 4 * (1 << 20)
    assert len(cold["measurement"]["samples_s"]) >= 3
    assert cold["verdict"]["status"] == "pass" and cold["test_outcome"] == "passed"
    assert cold["verdict"]["floor"]["floor"] == 0.3 and cold["verdict"]["floor"]["status"] == "pass"
    assert cold["verdict"]["baseline"]["outcome"] == "no-baseline"
    assert rows["test_perf.py::test_add", "hot"]["verdict"]["floor"] is None
    slow = rows["test_perf.py::test_slow", "vector_add"]
    assert slow["verdict"]["status"] == "fail" and slow["test_outcome"] == "failed"
    floor = slow["verdict"]["floor"]
    assert floor["floor"] == 0.99 and floor["status"] == "fail"
    assert report["devices"][0]["key"] == "mi300x" and report["devices"][0]["simulated"]


def test_markdown_summary_is_written_and_appended_to_the_job_summary(gp, monkeypatch):
    step_summary = gp.path / "step_summary.md"
    step_summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    gp.test_file(TWO_MEASUREMENTS)
    result = gp.run("--gpuperf", "--gpuperf-markdown=summary.md")
    result.assert_outcomes(passed=1, failed=1)
    text = (gp.path / "summary.md").read_text()
    assert text.startswith("<!-- pytest-gpuperf -->\n### pytest-gpuperf\n")
    assert "SIMULATED device" in text
    assert "**3 measurements in 2 tests: 2 ok, 1 failed (floor)**" in text
    assert "| `test_perf.py::test_add (cold)` |" in text
    assert "| `test_perf.py::test_slow` |" in text and "**FAIL floor**" in text
    assert "#### Notes" in text and "have no baseline for mi300x-sim" in text
    assert "#### Failures" in text and "efficiency 4" in text and "below the floor 99.00%" in text
    assert step_summary.read_text() == "earlier step\n" + text
    result.stdout.fnmatch_lines(
        ["gpuperf: Markdown summary: *summary.md", "gpuperf: appended to $GITHUB_STEP_SUMMARY*"]
    )


def test_pytest_benchmark_json_is_written(gp):
    gp.test_file(TWO_MEASUREMENTS)
    gp.run("--gpuperf", "--gpuperf-benchmark-json=bench.json")
    document = json.loads((gp.path / "bench.json").read_text())
    names = sorted(b["fullname"] for b in document["benchmarks"])
    assert names == [
        "test_perf.py::test_add::cold",
        "test_perf.py::test_add::hot",
        "test_perf.py::test_slow::vector_add",
    ]
    stats = document["benchmarks"][0]["stats"]
    assert stats["min"] <= stats["median"] <= stats["max"] and stats["rounds"] >= 3


def test_report_paths_come_from_the_ini_file(gp):
    gp.pytester.makeini(
        "[pytest]\ngpuperf = true\ngpuperf_backend = sim\ngpuperf_json = from-ini.json\n"
    )
    gp.test_file("def test_add(gpu_bench):\n    assert add(gpu_bench).measured\n")
    result = gp.run_plain("--gpuperf-budget=0.02")
    result.assert_outcomes(passed=1)
    assert json.loads((gp.path / "from-ini.json").read_text())["summary"]["total"] == 1
