"""baselines/mi300x.toml: the seed's reported MI300X figures, keyed to the perf suite's test
ids. A real MI300X is gated on them; the SIMULATED MI300X is not: simulated numbers are
judged against `mi300x-sim.toml` only, and the reported entries are shown beside them for
information.

The runs below are the repository's own tests/perf (not a copy), in a subprocess rooted at the
repository, so the ids the baselines are looked up by are exactly the suite's: a renamed test
that lost its baseline fails these tests. The file is still schema 1 (it is migrated on load).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.gate.judge import JudgeContext, Taken, judge
from pytest_gpuperf.report import failure_text
from pytest_gpuperf.runtime.devices import get_device

REPO = Path(__file__).resolve().parents[2]
SEED_DOC = "Making memory bound kernels go brr on a MI300X"
SEED_BYTES = 3 * 4 * 32 * 2**20  # vector add, 32M fp32: a, b read, c written
PLAIN = ("tests/perf/test_vector_add.py::test_vector_add_seed[plain-cold]", "vector_add")
BYPASS = ("tests/perf/test_vector_add.py::test_vector_add_seed[bypass-cold]", "vector_add_bypass")
# (efficiency, the seed's rocprof GB/s, its percentage as printed)
SEED_FIGURES = {PLAIN: (0.7185, 3807.83, "71.85%"), BYPASS: (0.8270, 4383.01, "82.70%")}
SHOWN_NOT_JUDGED = (
    "note: simulated numbers are never judged against a real device's baselines (mi300x.toml), "
    "only shown beside them*"
)


def test_the_file_holds_the_seed_figures_as_reported_entries():
    baselines = BaselineStore(REPO / "baselines").load("mi300x")  # validates the schema
    assert set(baselines.entries) == {(*key, "cold") for key in SEED_FIGURES}
    peak_bps = get_device("mi300x").peak_bps
    for key, (efficiency, gbps, printed) in SEED_FIGURES.items():
        entry = baselines.get(*key, "cold")
        assert entry is not None
        assert entry.source == "reported" and entry.saves == ()
        assert entry.efficiency == pytest.approx(efficiency, abs=5e-5)
        assert entry.efficiency_ci == (entry.efficiency, entry.efficiency)
        assert entry.run_spread == 0.07  # the seed's "+/- 7%" between runs
        assert entry.cache == "cold"
        assert entry.bytes_moved == SEED_BYTES
        assert entry.bandwidth_bps == pytest.approx(gbps * 1e9)
        assert entry.bandwidth_bps / peak_bps == pytest.approx(efficiency, abs=1e-4)
        assert entry.time_s * entry.bandwidth_bps == pytest.approx(SEED_BYTES, rel=1e-5)
        assert SEED_DOC in entry.reported_in
        assert "Making memory bound kernels go brr on a MI300X" in entry.reported_in
        assert f"Bandwidth Efficiency {printed}" in entry.reported_in


def _env(tmp_path: Path, seed: str = "1234") -> dict[str, str]:
    env = dict(os.environ, GPUPERF_SIM_SEED=seed, GPUPERF_LOCK_DIR=str(tmp_path / "locks"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("GITHUB_STEP_SUMMARY", None)
    return env


def _run_seed_tests(tmp_path: Path, selection: str, *options: str) -> tuple[int, str, dict]:
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/perf/test_vector_add.py",
            "-k",
            selection,
            "-p",
            "no:cacheprovider",
            "--gpuperf",
            "--gpuperf-backend=sim",
            "--gpuperf-device=mi300x",
            f"--gpuperf-json={report}",
            *options,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=300,
    )
    output = done.stdout + done.stderr
    results = {}
    if report.exists():
        document = json.loads(report.read_text())
        results = {(r["test_id"], r["measurement"]["name"]): r for r in document["results"]}
    return done.returncode, output, results


def test_on_the_simulated_mi300x_the_entries_are_shown_and_a_sim_baseline_gates(tmp_path):
    """One run of the seed tests with the repository's mi300x.toml beside a `mi300x-sim.toml`
    that holds an entry for the plain kernel only, far above what the simulated kernel
    reaches: the plain kernel fails against that entry; the bypass kernel, which has only its
    reported entry, passes with it shown (not compared). Both show the reported figures.
    (test_a_real_kernel_... shows the reported entry would fail the same number on a real
    MI300X.)"""
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    shutil.copy(REPO / "baselines" / "mi300x.toml", baselines / "mi300x.toml")
    sim_time_s = SEED_BYTES / (0.95 * 5.3e12)
    (baselines / "mi300x-sim.toml").write_text(
        f"""\
schema = 2
device = "mi300x-sim"

[[entry]]
id = "{PLAIN[0]}"
name = "{PLAIN[1]}"
cache = "cold"
efficiency = 0.95
efficiency_ci = [0.949, 0.951]
run_spread = 0.02
bandwidth_bps = {0.95 * 5.3e12}
time_s = {sim_time_s}
bytes_moved = {SEED_BYTES}

[[entry.save]]
efficiency = 0.95
efficiency_ci = [0.949, 0.951]
time_s = {sim_time_s}
simulated = true
note = "written by the test"
"""
    )
    code, output, results = _run_seed_tests(
        tmp_path, "seed and cold and (plain or bypass)", f"--gpuperf-baseline-dir={baselines}"
    )
    assert code == pytest.ExitCode.TESTS_FAILED, output
    assert set(results) == set(SEED_FIGURES), output
    for key, (efficiency, _, printed) in SEED_FIGURES.items():
        measurement, verdict = results[key]["measurement"], results[key]["verdict"]
        assert measurement["simulated"] and measurement["device_key"] == "mi300x"
        shown = verdict["baseline"]["info"]
        assert shown is not None, f"{key}: the reported entry is not shown\n{output}"
        assert shown["source"] == "reported" and shown["device_key"] == "mi300x"
        assert shown["efficiency"] == pytest.approx(efficiency, abs=5e-5)
        assert shown["path"] == str(baselines / "mi300x.toml")
        assert SEED_DOC in shown["provenance"] and printed in shown["provenance"]
    # bypass: only the reported entry, so nothing to compare with: no delta, no allowance
    bypass = results[BYPASS]["verdict"]
    assert bypass["status"] == "pass", output
    assert bypass["baseline"]["baseline"] is None and bypass["baseline"]["delta"] is None
    assert bypass["baseline"]["outcome"] == "no-baseline"
    # plain: judged against mi300x-sim.toml, and only against it
    plain = results[PLAIN]["verdict"]
    assert plain["status"] == "fail" and plain["baseline"]["outcome"] == "regressed", output
    assert plain["baseline"]["baseline"]["path"] == str(baselines / "mi300x-sim.toml")
    assert plain["baseline"]["baseline"]["efficiency"] == 0.95
    lines = output.splitlines()
    rows = {  # each measurement is on the line below its test id
        name: lines[lines.index(f"{mark} {test_id}") + 1]
        for (test_id, name), mark in ((PLAIN, "!"), (BYPASS, " "))
    }
    assert rows["vector_add"].split()[0] == "vector_add", output
    assert rows["vector_add"].endswith("FAIL regression")
    assert rows["vector_add_bypass"].split()[0] == "vector_add_bypass", output
    assert rows["vector_add_bypass"].endswith("pass")
    pytest.LineMatcher(lines).fnmatch_lines(
        [
            "vector_add: regressed: 7*% vs baseline 95.00% (*",
            f"*provenance:*written by the test*[[]{baselines / 'mi300x-sim.toml'}[]]",
            SHOWN_NOT_JUDGED,
            "2 measurements in 2 tests: 1 ok, 1 failed (regression)",
        ]
    )


def _seed_measurement(efficiency: float, reference_bps: float, *, simulated: bool) -> Measurement:
    time_s = SEED_BYTES / (efficiency * reference_bps)
    return Measurement(
        name="vector_add",
        kernel="vector_add",
        cache="cold",
        bytes_moved=SEED_BYTES,
        time_s=time_s,
        time_ci_s=(time_s * 0.998, time_s * 1.002),
        samples_s=(time_s,) * 20,
        peak_bps=get_device("mi300x").peak_bps,
        device_key="mi300x",
        device_name="AMD Instinct MI300X",
        backend="sim" if simulated else "hip",
        simulated=simulated,
        queue_method="flush-ahead",
    )


def test_a_real_kernel_well_below_the_reported_figure_fails_against_it():
    """A real MI300X is gated on the reported entry like any other: 60% against the seed's
    71.85% (-16.5%) is more than the +/-7% run spread of both runs explains, 68% is not; the
    failure quotes where the number came from. The same 60% on the simulated MI300X passes:
    the entry is shown beside it, not judged."""
    store = BaselineStore(REPO / "baselines")
    reference = store.lookup("mi300x", *PLAIN, "cold")
    assert reference is not None and reference.source == "reported"
    peak_bps = get_device("mi300x").peak_bps

    def decided(efficiency: float, *, simulated: bool = False):
        measurement = _seed_measurement(efficiency, peak_bps, simulated=simulated)
        (one,) = judge(PLAIN[0], [Taken(measurement)], store, JudgeContext(tolerance=0.01))
        return one.measurement, one.verdict

    measurement, slower = decided(0.60)
    assert slower.status == "fail" and slower.baseline.outcome == "regressed"
    assert slower.failed_checks == ("regression",)
    assert SEED_DOC in failure_text(measurement, slower)
    assert decided(0.68)[1].baseline.outcome == "within-noise"
    _, simulated = decided(0.60, simulated=True)
    assert simulated.status == "pass" and simulated.baseline.baseline is None
    assert simulated.baseline.info is not None and simulated.baseline.info.source == "reported"


def test_a_shown_entry_is_in_the_table_beside_a_gated_one(gp):
    """The seed run's layout in small: one measurement gated by its -sim entry (regressed), one
    with only a real entry shown, long enough names that the table must drop columns."""
    gp.test_file(
        """
        @pytest.mark.min_bw(0.3)
        def test_gated(gpu_bench):
            add(gpu_bench, name="vector_add_bypass")

        @pytest.mark.min_bw(0.3)
        def test_shown(gpu_bench):
            add(gpu_bench, name="vector_add_bypass")
        """
    )
    name = "vector_add_bypass"
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_gated", "name": name, "efficiency": 0.9}])
    gp.baseline("mi300x", [{"id": "test_perf.py::test_shown", "name": name, "efficiency": 0.8}])
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "! test_perf.py::test_gated",
            f"    {name} *90.0%*FAIL regression",
            "  test_perf.py::test_shown",
            f"    {name} *(80.0%)*pass",
            "note: simulated numbers are never judged against a real device's baselines*",
        ]
    )
