"""Stored baselines that learn their spread, through pytest on the simulated device: a history
of saves per entry, a new history when the code changes, entries per cache mode, and schema 1
files migrated."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""

TWO_MODES = """
import os

def test_add(gpu_bench):
    add(gpu_bench, cache=os.environ.get("MODE", "cold"))
"""


def entries(gp, key: str = "mi300x-sim") -> list[dict]:
    document = tomllib.loads((gp.path / "baselines" / f"{key}.toml").read_text())
    assert document["schema"] == 2
    return document["entry"]


def save(gp, seed: int, *args: str) -> None:
    gp.monkeypatch.setenv("GPUPERF_SIM_SEED", str(seed))
    result = gp.run("--gpuperf-save", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpuperf: saved 1 measurement to baselines/mi300x-sim.toml"])


def test_saves_build_a_history_and_the_spread_is_learned_from_it(gp):
    gp.test_file(PLAIN)
    save(gp, 1)
    (first,) = entries(gp)
    assert first["spread_basis"] == "prior" and len(first["save"]) == 1
    assert first["run_spread"] == 0.07  # the simulated device's prior
    for seed in (2, 3):
        save(gp, seed)
    (learned,) = entries(gp)
    # the history is kept; the simulated device's spread is its setting, known exactly, and
    # the file says so as the gate does (a real GPU learns it: tests/unit/test_gate.py)
    assert learned["spread_basis"] == "prior" and len(learned["save"]) == 3
    assert learned["run_spread"] == 0.07
    efficiencies = sorted(s["efficiency"] for s in learned["save"])
    assert learned["efficiency"] == efficiencies[1]  # the median save
    assert {s["fingerprint"] for s in learned["save"]} == {learned["save"][0]["fingerprint"]}
    for seed in (4, 5, 6):
        save(gp, seed, "--gpuperf-history=4")
    assert len(entries(gp)[0]["save"]) == 4  # only the newest are kept

    gp.monkeypatch.setenv("GPUPERF_SIM_SEED", "7")
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1)


def test_a_save_of_edited_code_starts_a_new_history(gp):
    gp.test_file(PLAIN)
    for seed in (1, 2, 3):
        save(gp, seed)
    gp.write_kernel(0.3)  # an edit to the kernel: another code object, much slower
    save(gp, 4)
    (entry,) = entries(gp)
    assert len(entry["save"]) == 1 and entry["spread_basis"] == "prior"
    assert entry["efficiency"] < 0.3
    gp.monkeypatch.setenv("GPUPERF_SIM_SEED", "5")
    result = gp.run("--gpuperf-save")
    result.stdout.fnmatch_lines(["*saved*"])


def test_a_hot_save_keeps_the_cold_entry(gp):
    gp.test_file(TWO_MODES)
    save(gp, 1)
    gp.monkeypatch.setenv("MODE", "hot")
    save(gp, 2)
    modes = sorted(entry["cache"] for entry in entries(gp))
    assert modes == ["cold", "hot"]


SCHEMA_1 = """\
schema = 1
device = "mi300x-sim"

[[entry]]
id = "test_perf.py::test_add"
name = "vector_add"
efficiency = {efficiency}
efficiency_ci = [{low}, {high}]
run_spread = 0.07
bandwidth_bps = 2.3e12
time_s = 5.4e-6
bytes_moved = 12582912
cache = "cold"
source = "measured"

[entry.provenance]
when = "2025-06-01T12:00:00Z"
commit = "0123456789abcdef"
backend = "sim"
simulated = true
samples = 40
"""


def test_a_schema_1_file_gates_and_migrates_on_the_next_save(gp):
    gp.test_file(PLAIN)
    path = gp.path / "baselines" / "mi300x-sim.toml"
    path.parent.mkdir()
    path.write_text(SCHEMA_1.format(efficiency=0.9, low=0.89, high=0.91))
    failed = gp.run("--gpuperf")
    failed.assert_outcomes(failed=1)  # 46% against 90%: regressed, read from schema 1
    failed.stdout.fnmatch_lines(["*regressed: 4*% vs baseline 90.00%*"])

    path.write_text(SCHEMA_1.format(efficiency=0.46, low=0.45, high=0.47))
    gp.run("--gpuperf").assert_outcomes(passed=1)
    save(gp, 2)
    (entry,) = entries(gp)
    # a schema-1 entry has no code fingerprint: the first save of known code starts afresh
    assert len(entry["save"]) == 1 and entry["save"][0]["fingerprint"].startswith("sha256:")
    assert "schema = 2" in path.read_text()
