"""From a finished sampling run to its Measurement: the usable-samples checks, the summary
statistics, the efficiency (and its calibration against the reference copy) and the record's
fields. sampling.py measures; this only reads what the run left, so it has no device work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_gpuperf.engine import stats
from pytest_gpuperf.engine.pairing import Pairing
from pytest_gpuperf.engine.policy import MeasureSettings, queue_method_for
from pytest_gpuperf.engine.results import GpuIdentity, Measurement
from pytest_gpuperf.engine.timing import Timed
from pytest_gpuperf.errors import ConfigError, NotMeasured
from pytest_gpuperf.runtime.info import DeviceInfo


def measurement_of(
    timed: list[Timed],
    position: int,
    *,
    label: str,
    settings: MeasureSettings,
    device: Any,
    info: DeviceInfo,
    pair: Pairing | None,
    graph_batches: bool,
    kernel_name: str,
    stopped_by: str,
    warmup_launches: int,
    wall_s: float,
    clocks: Any,
    extra: dict,
    extra_fields: dict,
    calibrated: bool = False,
) -> Measurement:
    """The Measurement of workload `position` of a finished run of `timed` (an A/B pair's
    head or base from `pair`'s paired samples); ConfigError when the run left too few
    usable samples or timed no work."""
    work = timed[position]
    samples_s = (pair.head_s if position == 0 else pair.base_s) if pair else work.samples_s
    checked = [len(pair.ratios)] if pair else [len(item.samples_s) for item in timed]
    if min(checked) < 3 and work.launch_on is None and extra["starved_samples_dropped"]:
        raise NotMeasured(  # a callable's work the queue could not be kept ahead of
            label,
            f"{min(checked)} samples kept and {extra['starved_samples_dropped']:,} dropped in "
            f"the {settings.budget_s:g} s budget: every dropped sample found the device queue "
            "empty, as when the work waits on the host after its first calls (a "
            "synchronisation the probe did not see) or the host cannot launch it as fast as "
            "the device runs it",
        )
    if min(checked) < 3:
        starved = extra["starved_samples_dropped"]
        way_out = (
            f"{starved} were dropped because the host could not keep the device queue "
            "ahead of so short a kernel: use cache='cold' (a flush runs before each "
            "launch) or a larger problem, or raise budget_s"
            if starved
            else "raise budget_s"
        )
        raise ConfigError(
            f"{label}: only {min(checked)} usable samples in "
            f"budget_s={settings.budget_s}; {way_out}"
        )
    if min(samples_s) <= 0.0:
        raise ConfigError(
            f"{label}: the timed work took no time on the device (events recorded "
            "back to back): the callable queued no GPU work on the stream being timed. "
            "gpu_bench.run(fn) times what fn launches on the default stream; launch the "
            "work there (or synchronously), or measure the kernel with gpu_bench(kernel, ...)"
        )
    summary = stats.summarize(samples_s, settings.confidence)
    peak_bps = float(device.peak_bps)
    efficiency = work.bytes_moved / summary.median / peak_bps
    reference_efficiency = calibrated_efficiency = None
    if calibrated and len(timed) > 1:
        reference = timed[-1]
        reference_time_s = float(np.median(reference.samples_s))
        reference_efficiency = reference.bytes_moved / reference_time_s / peak_bps
        calibrated_efficiency = efficiency / reference_efficiency
        extra["reference_samples_s"] = tuple(reference.samples_s)
        extra["reference_bytes_moved"] = reference.bytes_moved
    fields = {
        "gpu": GpuIdentity(info.index, info.pci_bus_id, info.uuid),
        "name": label,
        "kernel": kernel_name,
        "cache": settings.cache,
        "bytes_moved": work.bytes_moved,
        "time_s": summary.median,
        "time_ci_s": (summary.ci_low, summary.ci_high),
        "samples_s": tuple(samples_s),
        "peak_bps": peak_bps,
        "device_key": device.key,
        "device_name": device.name,
        "backend": info.backend,
        "simulated": info.simulated,
        "queue_method": queue_method_for(
            settings.cache,
            work.launches,
            bool(work.graphs),
            setup=work.setup is not None,
            graph_batches=graph_batches,
            as_it_runs=extra.get("as_it_runs", "") if work.as_it_runs else "",
        ),
        "warmup_count": warmup_launches,
        "stopped_by": stopped_by,
        "wall_s": wall_s,
        "calibrated_efficiency": calibrated_efficiency,
        "reference_efficiency": reference_efficiency,
        "clocks": clocks,
        "outliers": summary.outliers,
        "extra": extra,
    }
    fields.update(extra_fields)
    return Measurement(**fields)
