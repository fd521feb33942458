"""bench/stored_scenario.py: the whole path on the simulated device (a few processes), and the
analysis that re-judges a run's saves and judged runs by the gate's own code, pinned on that
run and on made-up inputs with known answers. The H100 runs docs/benchmarks.md quotes are raw
runs, kept out of the repository (docs/benchmarks.md, "Raw runs")."""

from __future__ import annotations

import copy
import json
import math

import pytest

from tests.bench_scripts import load_script


@pytest.fixture(scope="module")
def scenario():
    return load_script("stored_scenario")


@pytest.fixture(scope="module")
def simulated_run(scenario, tmp_path_factory) -> dict:
    """Three saves, one run with the extra read and one unchanged run of the short kernels."""
    out = tmp_path_factory.mktemp("scenario") / "scenario.json"
    code = scenario.main(
        [
            "--backend", "sim", "--saves", "3", "--drop-runs", "1", "--unchanged-runs", "1",
            "--budget", "0.01", "-k", "short", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    return json.loads(out.read_text())


def test_the_scenario_runs_on_the_simulated_device(scenario, simulated_run):
    document = simulated_run
    assert document["simulated"] and [r["kind"] for r in document["runs"]][:3] == ["save"] * 3
    assert all("results" in r for r in document["runs"]), document["runs"]
    assert "SIMULATED" in scenario.render(document, markdown=True)


def test_the_allowance_after_k_saves_is_the_gates_band_of_file_k(scenario, simulated_run):
    document = copy.deepcopy(simulated_run)
    document.pop("analysis", None)  # recomputed by this code, not the run's
    entries = scenario.analyse(document)["entries"]
    assert {r["cache"] for r in entries} == {"cold", "hot"}
    saved = sorted(int(n) for n in document["files"])
    assert saved and saved[-1] <= 3
    for row in entries:
        for n in saved:
            band = row[f"band_{n}"]
            # never below the 1% tolerance; otherwise the band's own noise
            assert row[f"allow_{n}"] == max(0.01, band["noise"])
            # noise = t(df) x sigma x centre factor, as the rendered arithmetic says
            exact = band["quantile"] * band["sigma"] * band["centre_factor"]
            assert band["noise"] == pytest.approx(exact, rel=1e-6)
        assert f"allow_{saved[-1] + 1}" not in row


def test_first_rounds_and_confirmed_verdicts_are_counted_apart(scenario, simulated_run):
    document = copy.deepcopy(simulated_run)
    document.pop("analysis", None)
    for run in document["runs"]:
        for result in run.get("results", ()):
            if run["kind"] == "drop":
                result.update(outcome="regressed", first_outcome="regressed", delta=-0.03)
            elif run["kind"] == "unchanged":
                result.update(outcome="pass", first_outcome="regressed", delta=0.004)
    document["runs"].append({"kind": "unchanged", "number": 9, "error": "no report"})
    entries = scenario.analyse(document)["entries"]
    for row in entries:
        assert (row["drop_runs"], row["drop_first"], row["drop_failed"]) == (1, 1, 1)
        assert (row["unchanged_runs"], row["unchanged_first"], row["unchanged_failed"]) == (1, 1, 0)
        assert row["drop_median_delta"] == -0.03 and row["unchanged_median_delta"] == 0.004
    text = scenario.render(document, markdown=False)
    assert "2 unchanged runs, each a separate pytest process (1 failed to report)" in text


def test_the_prior_fit_recovers_a_known_relative_part_and_jitter(scenario):
    """sigma(t)^2 = r^2 + (j / t)^2 fitted over entries' scatter: exact points give r and j
    back; a cache mode with one point is not fitted."""
    relative, jitter_s = 0.0008, 60e-9
    table = [
        {
            "cache": "cold",
            "time_us": t_us,
            "scatter": math.hypot(relative, jitter_s / (t_us * 1e-6)),
        }
        for t_us in (7.8, 28.0, 210.0)
    ]
    table.append({"cache": "hot", "time_us": 28.0, "scatter": 0.001})
    fits = scenario.fit_prior(table)
    assert set(fits) == {"cold"}
    assert fits["cold"]["relative_sigma"] == pytest.approx(relative, rel=1e-6)
    assert fits["cold"]["jitter_sigma_s"] == pytest.approx(jitter_s, rel=1e-6)
    assert len(fits["cold"]["points"]) == 3
