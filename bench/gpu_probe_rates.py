"""How often the degraded-GPU probe names a GPU, on the SIMULATED device, over many seeds:
a healthy pair (speeds 1, 1: every naming is a false alarm) and a pair with one GPU 5% slow
(speeds 1, 0.95: every miss is a missed degraded GPU), at the default margin.

    PYTHONPATH=. python3 bench/gpu_probe_rates.py [--seeds 60] [--device mi300x] [--json PATH]

Each seed is one simulated run: the GPUs share the run's device-wide and code drift and each
adds its own GPU-to-GPU part (gpu_spread) and buffer placements (docs/simulated-device.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from typing import Any

from pytest_gpuperf.config.options import DEFAULT_GPU_MARGIN
from pytest_gpuperf.session import gpu_probe
from pytest_gpuperf.simulate import device as sim


def probe(seed: int, speeds: tuple[float, ...], device: str, margin: float) -> Any:
    return gpu_probe.probe_gpus(
        "sim",
        list(range(len(speeds))),
        margin,
        open_gpu=lambda index: sim.open(index, device=device, seed=seed, gpu_speeds=speeds),
        cache_bytes_of=lambda backend: backend.spec.cache_bytes,
        hold=lambda backend: contextlib.nullcontext(),
    )


def rates(seeds: int, device: str, margin: float = DEFAULT_GPU_MARGIN) -> dict[str, Any]:
    """Per case: how many seeds named a GPU (the slow one, for the slow case), and the
    spread of the lowest ratio and of the probe's own interval."""
    result: dict[str, Any] = {"device": device, "margin": margin, "seeds": seeds}
    for case, speeds in (("healthy", (1.0, 1.0)), ("slow_5pct", (1.0, 0.95))):
        named = right = undecided = 0
        lowest, spreads = [], []
        for seed in range(seeds):
            report = probe(seed, speeds, device, margin)
            named += bool(report.degraded)
            undecided += bool(report.undecided)
            right += [g.index for g in report.degraded] == ([1] if speeds[1] < 1 else [])
            lowest.append(min(g.ratio for g in report.gpus if g.ratio is not None))
            spreads += [g.spread for g in report.gpus]
        result[case] = {
            "named": named,
            "as_expected": right,
            "undecided": undecided,
            "lowest_ratio_min": min(lowest),
            "lowest_ratio_median": statistics.median(lowest),
            "lowest_ratio_max": max(lowest),
            "probe_spread_median": statistics.median(spreads),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=60)
    parser.add_argument("--device", default="mi300x")
    parser.add_argument("--json", default="")
    options = parser.parse_args()
    began = time.perf_counter()
    found = rates(options.seeds, options.device)
    found["wall_s"] = round(time.perf_counter() - began, 1)
    text = json.dumps(found, indent=2)
    print(text)
    if options.json:
        with open(options.json, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
