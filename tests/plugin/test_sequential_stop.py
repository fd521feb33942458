"""How long a measurement samples follows from the decision it serves (engine/sequential.py),
through pytest on the simulated device: against a stored baseline, a kernel far inside its
allowance stops at the first look that may decide, one at the edge of its allowance samples
on to the horizon; a run with nothing to judge stops at the precision rule, and a save keeps
the minimum sampling rule it always had."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pytest_gpuperf.engine.sequential import MIN_DECIDE_SAMPLES, SIM_STORED_HORIZON_S

TWO = """
def test_add(gpu_bench):
    add(gpu_bench, name="far")
    add(gpu_bench, name="edge")
"""

# a budget above the simulated horizon (the suite's default budget is 0.02 s)
LONGER = ("-o", "gpuperf_budget=0.2")


def measurements(gp, name: str) -> dict[str, dict]:
    document = json.loads((gp.path / name).read_text())
    return {r["measurement"]["name"]: r["measurement"] for r in document["results"]}


def scale_entry(path: Path, name: str, factor: float) -> None:
    """Multiply the efficiency (and its interval) of entry `name` and its saves by `factor`,
    as a hand edit of the file would."""
    lines, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("[[entry]]"):
            inside = False
        if line.startswith("name = "):
            inside = line == f'name = "{name}"'
        if inside and line.startswith(("efficiency = ", "efficiency_ci = ")):
            key, value = line.split(" = ")
            numbers = [float(v) * factor for v in re.findall(r"[0-9.eE+-]+", value)]
            shown = ", ".join(f"{v:.6g}" for v in numbers)
            line = f"{key} = [{shown}]" if value.startswith("[") else f"{key} = {shown}"
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")


def test_far_inside_the_band_stops_early_and_at_the_edge_samples_to_the_horizon(gp):
    gp.monkeypatch.setenv("GPUPERF_SIM_RUN_SPREAD", "0.002")  # a quiet device: the 1% tolerance
    gp.test_file(TWO)
    gp.run("--gpuperf", "--gpuperf-json=plain.json", *LONGER).assert_outcomes(passed=1)
    for m in measurements(gp, "plain.json").values():  # nothing to judge: the precision rule
        assert m["extra"]["stop_target"]["kind"] == "precision"
        assert m["stopped_by"] == "precision"
    gp.run("--gpuperf-save", "--gpuperf-json=saved.json", *LONGER).assert_outcomes(passed=1)
    # a save samples as it always did (no target: its minimum sampling rule)
    assert all("stop_target" not in m["extra"] for m in measurements(gp, "saved.json").values())
    # the same seed draws the same run: "far" measures where it was saved, "edge" is edited
    # 1% faster, so that it measures at the edge of the 1% allowance
    scale_entry(gp.path / "baselines" / "mi300x-sim.toml", "edge", 1 / 0.99)
    judged_run = gp.run("--gpuperf", "--gpuperf-json=judged.json", *LONGER)
    judged = measurements(gp, "judged.json")
    far, edge = judged["far"], judged["edge"]
    assert far["extra"]["stop_target"]["kind"] == edge["extra"]["stop_target"]["kind"] == "stored"
    assert far["extra"]["stop_target"]["edges"] == ["regressed", "improved"]
    assert far["stopped_by"] == "decided", judged_run.stdout.str()
    assert len(far["samples_s"]) <= 2 * MIN_DECIDE_SAMPLES
    assert far["extra"]["sampling_s"] < SIM_STORED_HORIZON_S / 2
    assert len(edge["samples_s"]) > 3 * len(far["samples_s"]), judged_run.stdout.str()
    assert edge["extra"]["sampling_s"] > 3 * far["extra"]["sampling_s"]
    assert edge["stopped_by"] in ("horizon", "decided")


def test_a_floor_alone_is_decided_by_its_edge(gp):
    gp.test_file(
        """
        @pytest.mark.min_bw(0.05)
        def test_add(gpu_bench):
            add(gpu_bench)
        """
    )
    gp.run("--gpuperf", "--gpuperf-json=floor.json", *LONGER).assert_outcomes(passed=1)
    (m,) = measurements(gp, "floor.json").values()
    assert m["extra"]["stop_target"]["kind"] == "floor"
    assert m["extra"]["stop_target"]["edges"] == ["floor"]
    assert m["stopped_by"] == "decided"
