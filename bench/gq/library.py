"""How does the gate decide on the simulated MI300X? The library part: its A/B and history
decisions over thousands of fresh simulated devices, in a process pool (the model's numbers,
not a device's)."""

from __future__ import annotations

import argparse
import inspect
import math
import multiprocessing
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lab.kernels import BLOCK, KERNEL, kernel_source
from lab.runs import scratch

from .ab import ab_row
from .history import HISTORY_SAVES, history_check, history_row, tolerances
from .points import AA, AA_OTHER, SLOWER
from .records import Trial

SIM_SLOWDOWNS = (0.03, 0.05)  # A/B heads of the library part
SIM_HISTORY_SLOWDOWNS = (0.03, 0.05, 0.10, 0.20)
CODE_SHARES = (0.0, 0.05, 0.15, 0.30)


def sim_open_kwargs(
    accepted: Iterable[str],
    run_spread: float,
    common_fraction: float | None,
    code_share: float | None,
    extra: Mapping[str, float],
    device: str = "mi300x",
) -> dict[str, Any]:
    """open_sim's model options: the device (a key of the device table), run_spread, and the
    variance split where the simulator takes it (common_fraction; placement_fraction = what
    the common and code shares leave)."""
    accepted = set(accepted)
    kwargs: dict[str, Any] = {"device": device, "run_spread": run_spread}
    if common_fraction is not None and "common_fraction" in accepted:
        kwargs["common_fraction"] = common_fraction
    if code_share is not None:
        if "placement_fraction" not in accepted:
            raise ValueError(
                "this simulated device has no code-object share (no placement_fraction)"
            )
        common = common_fraction if common_fraction is not None else 0.5
        placement = 1.0 - common - code_share
        if placement < -1e-9:
            raise ValueError(
                f"common_fraction {common} + code share {code_share} exceed the whole variance"
            )
        kwargs["placement_fraction"] = max(0.0, placement)
    for key, value in extra.items():
        if key not in accepted:
            raise ValueError(
                f"the simulated device has no option {key!r}; it takes {sorted(accepted)}"
            )
        kwargs[key] = value
    return kwargs


def _open_sim_parameters() -> tuple[set[str], dict[str, Any]]:
    from pytest_gpuperf.simulate.device import open as open_sim

    parameters = inspect.signature(open_sim).parameters
    defaults = {k: p.default for k, p in parameters.items() if p.default is not inspect._empty}
    return set(parameters), defaults


@dataclass(frozen=True)
class SimKernels:
    """The library part's kernel files and their simulated fingerprints."""

    base: str
    other: str  # the same work, another code object (GQ_SALT 2)
    slowed: dict[float, tuple[str, str]]  # slowdown -> (file, fingerprint)


def write_sim_kernels(directory: Path) -> SimKernels:
    from pytest_gpuperf import open_device

    directory.mkdir(parents=True, exist_ok=True)
    paths = {"base": directory / "base.hip", "other": directory / "other.hip"}
    paths["base"].write_text(kernel_source(0))
    paths["other"].write_text(kernel_source(0, salt=2))
    slowdowns = sorted(set(SIM_SLOWDOWNS) | set(SIM_HISTORY_SLOWDOWNS))
    slowed = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with open_device("sim", seed=0) as device:
            for number, slowdown in enumerate(slowdowns):
                path = directory / f"slow{number}.hip"
                path.write_text(kernel_source(0, salt=10 + number))
                kernel = device.kernel(path, KERNEL)
                slowed[slowdown] = (str(path), device.backend.kernel_fingerprint(kernel))
            settings = device.backend.settings
            if not hasattr(settings, "slowdown"):
                raise RuntimeError(
                    "this simulated device keys kernel_slowdown by kernel name only: a slower "
                    "head needs its own code object's slowdown (fingerprint keys)"
                )
    return SimKernels(str(paths["base"]), str(paths["other"]), slowed)


def _sim_buffers(device: Any, elements: int) -> tuple:
    """Lazily zero-filled buffers (nothing is computed: the library part times only)."""
    a, b, c, extra = (device.backend.alloc(4 * n) for n in (elements, elements, elements, 1))
    return (a, b, c, extra, elements)


def sim_ab_trial(job: Mapping[str, Any]) -> dict[str, Any]:
    """One A/B comparison on a fresh simulated device, decided as the plugin decides it."""
    from pytest_gpuperf import open_device
    from pytest_gpuperf.gate.ab import check_comparison
    from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_THRESHOLD

    warnings.simplefilter("ignore")
    elements = job["elements"]
    model = {**job["model"], "kernel_slowdown": job["slowdown"]}
    with open_device("sim", seed=job["seed"], **model) as device:
        base = device.kernel(job["base"], KERNEL)
        head = device.kernel(job["head"], KERNEL)
        # the pair gets the fixture's budgets (gate/pairing.py)
        paired = device.compare(
            head, base, grid=(elements + BLOCK - 1) // BLOCK, block=BLOCK, cache="cold",
            args=_sim_buffers(device, elements), bytes=12 * elements, budget_s=job["budget"],
            threshold=DEFAULT_COMPARE_THRESHOLD,
        )  # fmt: skip
    check = check_comparison(paired, ref="base", ref_commit="", threshold=DEFAULT_COMPARE_THRESHOLD)
    return {
        **{key: job[key] for key in ("share", "size", "point", "seed")}, "state": check.state,
        "ratio": paired.ratio, "ratio_ci": list(paired.ratio_ci), "pairs": paired.pairs,
        "time_s": paired.base.time_s, "drift": check.drift, "drift_basis": check.drift_basis,
        "loads": check.loads, "median_ratio": check.median_ratio, "valid": True,
    }  # fmt: skip


def sim_history_trial(job: Mapping[str, Any]) -> dict[str, Any]:
    """K fresh devices save the base code; one more device is judged on the base code and on
    each slower head (its own code object), every decision by the gate's own functions."""
    from pytest_gpuperf import open_device

    warnings.simplefilter("ignore")
    elements = job["elements"]
    launch = {"grid": (elements + BLOCK - 1) // BLOCK, "block": BLOCK, "bytes": 12 * elements}

    def measure(seed: int, paths: Sequence[str], slowdown: Mapping[str, float]) -> list:
        with open_device("sim", seed=seed, **job["model"], kernel_slowdown=slowdown) as device:
            args = _sim_buffers(device, elements)
            # each kernel loaded just before it is measured: the simulated device's draws
            return [device.measure(device.kernel(p, KERNEL), args=args, budget_s=job["budget"],
                                   **launch) for p in paths]  # fmt: skip

    saves = [measure(seed, [job["base"]], {})[0] for seed in job["save_seeds"]]
    slowed = job["slowed"]  # [(slowdown, path, fingerprint)]
    judged = measure(
        job["judged_seed"],
        [job["base"], *(path for _, path, _ in slowed)],
        {fingerprint: 1.0 + s for s, _, fingerprint in slowed},
    )
    checks = []
    for count in HISTORY_SAVES:
        for tolerance in tolerances():
            for label, measurement in zip(
                ["unchanged", *(f"+{s:.0%}" for s, _, _ in slowed)], judged, strict=True
            ):
                check = history_check(saves[-count:], measurement, tolerance, job["run_spread"])
                checks.append({"saves": count, "tolerance": tolerance, "judged": label, **check})
    return {"seed": job["judged_seed"], "checks": checks}


def _pool_map(
    function: Callable[[Any], Any], jobs: Sequence[Any], workers: int, what: str
) -> list[Any]:
    """`function` over `jobs` in a pool of fresh processes (in this one for workers=1)."""
    results = []
    began = time.perf_counter()
    step = max(1, len(jobs) // 10)

    def collect(mapped: Iterable[Any]) -> None:
        for done, result in enumerate(mapped, start=1):
            results.append(result)
            if done % step == 0 or done == len(jobs):
                took = time.perf_counter() - began
                print(f"  {what}: {done}/{len(jobs)} trials, {took:.0f} s", file=sys.stderr)

    if workers <= 1:
        collect(map(function, jobs))
    else:
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            collect(pool.imap(function, jobs, chunksize=8))
    return results


def library_part(options: argparse.Namespace, began: float) -> dict[str, Any]:
    """The simulated MI300X through the library: the A/B grid, then the history path."""
    from pytest_gpuperf.runtime.devices import KNOWN_DEVICES

    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    accepted, defaults = _open_sim_parameters()
    common = options.common_fraction
    if common is None:
        common = defaults.get("common_fraction")
    extra = dict(_parse_option(text) for text in options.sim_option)
    shares: list[float | None] = list(options.code_shares)
    model_note = ""
    if "placement_fraction" not in accepted:
        shares = [None]
        model_note = "this simulator has no code-object share: one run with its own split"
    with scratch("gate-quality-sim") as root:
        kernels = write_sim_kernels(root / "kernels")
        models = {
            share: sim_open_kwargs(
                accepted, options.run_spread, common, share, extra, options.sim_device
            )
            for share in shares
        }
        sizes = {"long": options.long_elements, "short": options.short_elements}
        draw = random.Random(options.seed)
        seeds = iter(lambda: draw.getrandbits(31), None)  # distinct runs, reproducibly
        jobs = []
        for share, model in models.items():
            for size, elements in sizes.items():
                heads = {AA: (kernels.base, {}), AA_OTHER: (kernels.other, {})}
                for slowdown in SIM_SLOWDOWNS:
                    path, fingerprint = kernels.slowed[slowdown]
                    heads[f"+{slowdown:.0%}"] = (path, {fingerprint: 1.0 + slowdown})
                for point, (head, slowdown_map) in heads.items():
                    jobs += [
                        {"share": share, "size": size, "point": point, "elements": elements,
                         "model": model, "base": kernels.base, "head": head,
                         "slowdown": slowdown_map, "budget": options.budget, "seed": next(seeds)}
                        for _ in range(options.trials)
                    ]  # fmt: skip
        ab_trials = _pool_map(sim_ab_trial, jobs, options.workers, "A/B")
        history_share = options.history_share if shares != [None] else None
        history_model = sim_open_kwargs(
            accepted, options.run_spread, common, history_share, extra, options.sim_device
        )
        slowed = [(s, *kernels.slowed[s]) for s in SIM_HISTORY_SLOWDOWNS]
        history_jobs = [
            {"elements": options.long_elements, "model": history_model, "slowed": slowed,
             "run_spread": options.run_spread, "base": kernels.base, "budget": options.budget,
             "save_seeds": [next(seeds) for _ in range(max(HISTORY_SAVES))],
             "judged_seed": next(seeds)}
            for _ in range(options.trials)
        ]  # fmt: skip
        history_trials = _pool_map(sim_history_trial, history_jobs, options.workers, "history")
        settings = _model_settings(history_model)
    return {
        "title": "", "part": "library", "backend": "sim",
        "device": f"Simulated {KNOWN_DEVICES[options.sim_device].name}",
        "device_key": options.sim_device, "command": options.command, "started": started,
        "complete": True,
        "model": {"open_sim": {str(share): model for share, model in models.items()},
                  "history_model": history_model, "settings": settings, "note": model_note},
        "ab": score_sim_ab(ab_trials, models), "history": score_sim_history(history_trials),
        "ab_trials": ab_trials, "history_trials": history_trials,
        "wall_s": time.perf_counter() - began,
    }  # fmt: skip


def _model_settings(model: Mapping[str, Any]) -> dict[str, Any]:
    """The simulated device's full settings for `model` (what the run really used)."""
    from pytest_gpuperf.simulate import device as sim

    backend = sim.open(0, seed=0, **model)
    try:
        settings = backend.settings
        names = ("run_spread", "common_fraction", "placement_fraction", "code_fraction",
                 "jitter", "launch_overhead_s", "host_launch_s", "cache_speedup")  # fmt: skip
        found = {name: getattr(settings, name) for name in names if hasattr(settings, name)}
        found["model_version"] = getattr(sim, "MODEL_VERSION", "?")
        return found
    finally:
        backend.close()


def score_sim_ab(trials: Sequence[Mapping[str, Any]], models: Mapping[Any, Any]) -> list[dict]:
    rows = []
    for share in models:
        for size in ("long", "short"):
            by_point: dict[str, list[Trial]] = {}
            for t in trials:
                if t["share"] == share and t["size"] == size:
                    by_point.setdefault(t["point"], []).append(Trial(
                        name=t["point"], status="pass", test_outcome="passed", state=t["state"],
                        ratio=t["ratio"], ratio_ci=tuple(t["ratio_ci"]), pairs=t["pairs"],
                        threshold=0.0, time_s=t["time_s"], efficiency=math.nan,
                        relative_ci=math.nan, base_efficiency=None, drift=t.get("drift"),
                        drift_basis=t.get("drift_basis", ""), median_ratio=t.get("median_ratio"),
                    ))  # fmt: skip
            for point, items in by_point.items():
                kind = point if point in (AA, AA_OTHER) else SLOWER
                targets = {AA: "<= 1% regressed", AA_OTHER: "<= 1% regressed",
                           "+5%": ">= 95% regressed"}  # fmt: skip
                target = targets.get(point, "")
                row = ab_row(f"{size} {point}", kind, items, target)
                row["code_share"] = share
                rows.append(row)
    return rows


def score_sim_history(trials: Sequence[Mapping[str, Any]]) -> list[dict]:
    grouped: dict[tuple[int, float], dict[str, list]] = {}
    for trial in trials:
        for check in trial["checks"]:
            slot = grouped.setdefault((check["saves"], check["tolerance"]), {})
            slot.setdefault(check["judged"], []).append(check)
    rows = []
    for (saves, tolerance), checks in sorted(grouped.items()):
        ordered = {"unchanged": checks["unchanged"]}
        ordered.update((k, v) for k, v in checks.items() if k != "unchanged")
        rows.append(history_row(saves, tolerance, ordered))
    return rows


def sim_device_key(text: str) -> str:
    """--sim-device: a key of the device table, checked when the arguments are parsed."""
    from pytest_gpuperf.runtime.devices import KNOWN_DEVICES

    if text not in KNOWN_DEVICES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a simulated device; one of {', '.join(KNOWN_DEVICES)}"
        )
    return text


def _parse_option(text: str) -> tuple[str, float]:
    key, _, value = text.partition("=")
    if not key or not value:
        raise argparse.ArgumentTypeError(f"--sim-option takes KEY=VALUE, got {text!r}")
    return key.strip(), float(value)
