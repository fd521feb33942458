"""The dashboard and the comparison read what a pytest run writes: baselines saved by
`--gpuperf-save`, reports by `--gpuperf-json` and by the shard merge, on the simulated device
(a slower kernel model is a real regression there: the gate judges it)."""

from __future__ import annotations

import json

from pytest_gpuperf import compare
from pytest_gpuperf.commands.merge import __main__ as merge
from pytest_gpuperf.commands.publish.__main__ import main as publish_main
from pytest_gpuperf.commands.publish.series import gather
from pytest_gpuperf.record.report_reader import read_report

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


def test_pages_and_comparisons_of_real_runs(gp, capsys):
    gp.test_file(PLAIN)
    for seed in (1, 2, 3):
        gp.monkeypatch.setenv("GPUPERF_SIM_SEED", str(seed))
        gp.run("--gpuperf-save").assert_outcomes(passed=1)
    gp.monkeypatch.setenv("GPUPERF_SIM_SEED", "4")
    gp.run("--gpuperf", "--gpuperf-json=run1.json").assert_outcomes(passed=1)
    gp.run("--gpuperf", "--gpuperf-shard=1/1", "--gpuperf-json=shard.json").assert_outcomes(
        passed=1
    )
    assert merge.main(["shard.json", "--json", "merged.json"]) == 0
    gp.write_kernel(0.3)  # the kernel's model now streams at 30%: slower, and judged so
    gp.monkeypatch.setenv("GPUPERF_SIM_SEED", "5")
    gp.run("--gpuperf", "--gpuperf-json=run2.json").assert_outcomes(failed=1)
    baseline = gp.path / "baselines" / "mi300x-sim.toml"
    runs = [gp.path / name for name in ("run1.json", "merged.json", "run2.json")]
    capsys.readouterr()

    assert publish_main([str(baseline), *map(str, runs), "-o", "page.html"]) == 0
    assert compare.main(["run1.json", "merged.json", "--fail-on-regression"]) == 0
    assert compare.main(["run1.json", "run2.json", "--fail-on-regression"]) == 1

    out = capsys.readouterr().out
    assert "1 measurement: 1 within noise" in out and "1 measurement: 1 slower" in out
    dashboard = gather([baseline], [read_report(path) for path in runs])
    (series,) = dashboard.series
    assert series.state == "regressed" and len(series.points) == 3 + 3
    assert [p.status for p in series.points if p.kind == "run"] == ["pass", "pass", "fail"]
    assert dashboard.runs[1].merged and not dashboard.runs[0].merged
    verdict = json.loads(runs[2].read_text())["results"][0]["verdict"]["baseline"]
    assert series.false_alarm_rate == verdict["false_alarm_rate"] > 0  # the run's own level
    text = (gp.path / "page.html").read_text()
    assert text.count('<section class="plot"') == 1 and "s-regressed" in text
