"""bench/stored_quality.py: the replay of a gate_quality processes run and the model, on a
small synthetic run (its shape is the H100 run's JSON), scored through the gate's own code."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from tests.bench_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "stored_quality.py"


def _load():
    return load_script("stored_quality")


def _document(processes: int = 8) -> dict:
    """Processes as bench/gate_quality.py records them: long (145 us) and short (7.8 us)
    kernels, the same work in other code and slower heads, each with its A/B base."""
    rng = random.Random(1)
    kernels = {
        "long_same": (145e-6, 0.0016, 0.0),
        "long_equiv": (145e-6, 0.0016, 0.0),
        "long_slow3": (145e-6, 0.0016, 0.033),
        "short_same": (7.8e-6, 0.009, 0.0),
        "short_slow3": (7.8e-6, 0.009, 0.04),
    }
    runs = []
    for index in range(processes):
        trials = {}
        for name, (time_s, sigma, slower) in kernels.items():
            base = 0.8 * math.exp(rng.gauss(0.0, sigma))
            trials[name] = {
                "test_outcome": "passed",
                "efficiency": base / (1 + slower),
                "base_efficiency": base,
                "time_s": time_s * (1 + slower),
                "relative_ci": 0.002,
            }
        runs.append({"index": index, "trials": trials})
    return {"device": "NVIDIA H100 SXM 80GB", "started": "2026-11-24", "processes": runs}


def test_replay_scores_every_size_through_the_gate(tmp_path):
    bench = _load()
    path = tmp_path / "gq.json"
    path.write_text(json.dumps(_document()))
    out = tmp_path / "sq.json"
    assert bench.main(["--replay", str(path), "--trials", "8", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    replay = [r for r in document["rows"] if r["part"] == "replay"]
    points = {(r["entry"], r["judged"], r["what"]) for r in replay}
    assert ("long_same", "long_equiv", "other code, same work") in points
    assert ("short_same", "short_slow3", "slower") in points
    assert {r["saves"] for r in replay} == {1, 3, 5}
    three = {r["judged"]: r for r in replay if r["saves"] == 3}
    assert three["long_slow3"]["regressed"] == 1.0 and three["long_same"]["regressed"] == 0.0
    # 3 neighbours x 2 df: the pool decides where its band is the narrower (else set aside)
    assert three["long_same"]["pooled"] > 0
    assert [r for r in document["rows"] if r["part"] == "model"]
    assert 0 <= document["a"] < 0.005 and 20e-9 < document["b"] < 200e-9  # ~70 ns of jitter
