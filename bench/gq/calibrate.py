"""How much longer does vector_add_more take per extra byte on this device? Measured in a
child process (the command's `--child calibrate`) by the library's A/B pair."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.children import emit, run_child
from lab.kernels import BLOCK, KERNEL, extra_floats, kernel_source

from .plan import permille_for

COMMAND = Path(__file__).resolve().parents[1] / "gate_quality.py"  # runs calibrate_child
PROBE_PERMILLE = {"long": 50, "mid": 100, "short": 100}  # the probe: 5% / 10% more bytes


def calibrate_child(spec: Mapping[str, Any]) -> None:
    """In its own process: how much longer vector_add_more takes per size, by the library's
    interleaved A/B pair (measure_pair) on the same buffers, at two probes: PROBE_PERMILLE
    more bytes, then the permille that probe's slope puts at +1%. A line through both is what
    the plan inverts, so the small slowdowns land where they are named."""
    import numpy as np

    from pytest_gpuperf import open_device

    warnings.simplefilter("ignore")  # the simulated device: the probes have no model
    workdir = Path(spec["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    with open_device(spec["backend"]) as device:
        for size, elements in spec["sizes"].items():
            big = PROBE_PERMILLE[size]
            base_path = workdir / "base.hip"
            base_path.write_text(kernel_source(0))
            base = device.kernel(base_path, KERNEL)
            rng = np.random.default_rng(0)
            a = device.to_device(rng.random(elements, dtype=np.float32))
            b = device.to_device(rng.random(elements, dtype=np.float32))
            c = device.empty(elements)
            extra = device.to_device(np.zeros(extra_floats(elements, big) + 1, np.float32))
            args = (a, b, c, extra, elements)
            paired = _probe_pair(device, base, workdir / f"probe_{size}_{big}.hip", big, args)
            probes = [(big, paired.ratio)]
            small = permille_for(0.01, (paired.ratio - 1.0) / big)
            if small < big:
                path = workdir / f"probe_{size}_{small}.hip"
                probes.append((small, _probe_pair(device, base, path, small, args).ratio))
            emit({
                "size": size, "elements": elements, "probe_permille": big, "ratio": paired.ratio,
                "ratio_ci": list(paired.ratio_ci), "pairs": paired.pairs,
                "probes": [list(probe) for probe in probes], "base_time_s": paired.base.time_s,
                "slope_per_permille": (paired.ratio - 1.0) / big, "device": device.spec.name,
                "simulated": device.simulated,
            })  # fmt: skip


def _probe_pair(device: Any, base: Any, path: Path, permille: int, args: tuple[Any, ...]) -> Any:
    """measure_pair of vector_add_more reading `permille` more bytes against `base`."""
    from pytest_gpuperf.engine.measure import MeasureSettings, measure_pair

    path.write_text(kernel_source(permille))
    elements = args[-1]
    return measure_pair(
        device.backend, device.kernel(path, KERNEL), base, grid=(elements + BLOCK - 1) // BLOCK,
        block=BLOCK, args=args, bytes_moved=12 * elements, device=device.spec,
        settings=MeasureSettings(cache="cold", target_rel_ci=0.002, budget_s=3.0),
        stop_when=lambda ci, _base_s: (ci[1] - ci[0]) / 2 <= 0.002,
    )  # fmt: skip


def calibrate(
    backend: str, sizes: Mapping[str, int], workdir: Path, env: Mapping[str, str]
) -> dict[str, Any]:
    """Run calibrate_child; {size: its row} plus "source" (what the plan rests on)."""
    spec = {"backend": backend, "sizes": dict(sizes), "workdir": str(workdir)}
    rows = run_child([str(COMMAND), "--child", "calibrate", json.dumps(spec)], 120, env=env)
    found: dict[str, Any] = {row["size"]: row for row in rows}
    found["source"] = (
        "calibrated: interpolated between the library's A/B pairs of two probes (5% / 10% "
        "more bytes, and the permille that slope puts at +1%)"
    )
    return found
