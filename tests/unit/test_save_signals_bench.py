"""bench/save_signals.py (issue 55 item 11): its checks find what they look for, on files made
here (a torn file, a lost entry, a save claimed but not made, a stray temporary), and two real
runs on the simulated device end with nothing found."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.bench_scripts import load_script
from tests.plugin.conftest import baseline_toml


@pytest.fixture(scope="module")
def bench():
    return load_script("save_signals")


def _file(folder: Path, ids: list[str]) -> Path:
    path = folder / "baselines" / "mi300x-sim.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(baseline_toml("mi300x-sim", [{"id": i, "efficiency": 0.5} for i in ids]))
    return path


def test_the_checks_find_torn_lost_stray_and_wrong_claims(bench, tmp_path):
    path = _file(tmp_path, ["a", "b"])
    before = bench.entries(path)
    report = tmp_path / "report.json"
    assert bench.check(path, before, report, "")["problems"] == []
    shutil.copyfile(path, tmp_path / "kept.toml")
    path.write_text(path.read_text()[:-40])  # torn
    assert bench.check(path, before, report, "")["problems"][0].startswith("torn")
    _file(tmp_path, ["a"])  # b lost
    assert bench.check(path, before, report, "")["problems"] == ["lost: b"]
    _file(tmp_path, ["a", "b"])
    (path.parent / ".mi300x-sim.toml.1.tmp").write_text("")
    assert "left beside the file" in bench.check(path, before, report, "")["problems"][0]
    (path.parent / ".mi300x-sim.toml.1.tmp").unlink()
    report.write_text(
        json.dumps({"results": [{"test_id": "a", "verdict": {"save": {"saved": True}}}]})
    )
    said = bench.check(path, before, report, "")["problems"]
    assert said == ["a: the report says saved=True, the file says not saved"]


@pytest.mark.slow
def test_two_runs_find_nothing(bench, capsys):
    assert bench.main(["--runs", "2", "--seed", "5"]) == 0
    assert "2 runs: 0 with a torn or lost entry" in capsys.readouterr().out
