"""Measurements made by hand for the unit tests, through one builder: a test names what it is
about (efficiency, time, bytes, interval, device) and the builder fills the rest with a
plausible cold measurement on a real device, so the many fields of `Measurement` are spelt
out once here instead of in every test module."""

from __future__ import annotations

from typing import Any

from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.engine.results import Measurement

MI300X = {"device_key": "mi300x", "device_name": "AMD Instinct MI300X", "peak_bps": 5.3e12}
H100 = {"device_key": "h100-sxm", "device_name": "NVIDIA H100 SXM 80GB", "peak_bps": 3.352e12}

# A stored baseline at 90% of the simulated MI300X's peak, as a check carries it: what the
# merge's recheck decides a forged or edited check against.
SIM_REFERENCE = BaselineRef(
    efficiency=0.90,
    efficiency_ci=(0.89, 0.91),
    run_spread=0.02,
    bandwidth_bps=4.7e12,
    time_s=1e-4,
    cache="cold",
    source="measured",
    provenance="",
    path="baselines/mi300x-sim.toml",
)


def measurement(
    efficiency: float | None = None,
    *,
    time_s: float | None = None,
    bytes_moved: int | None = None,
    rel_ci: float = 0.0,
    samples: int = 100,
    **changes: Any,
) -> Measurement:
    """A Measurement of `bytes_moved` in `time_s` at `efficiency` of the peak: give two of the
    three (efficiency with time_s: the bytes follow; efficiency with bytes_moved: the time).
    Its interval is the time +-`rel_ci`, its samples `samples` copies of the time; any other
    field (name, device_key, backend, gpu, ...) by keyword. Defaults: a cold kernel "k" on
    an MI300X through hip, stopped by nothing in particular."""
    peak_bps = float(changes.pop("peak_bps", MI300X["peak_bps"]))
    if bytes_moved is None:
        assert efficiency is not None and time_s is not None
        bytes_moved = int(efficiency * peak_bps * time_s)
    elif time_s is None:
        assert efficiency is not None
        time_s = bytes_moved / (efficiency * peak_bps)
    fields: dict[str, Any] = {
        "name": "k",
        "kernel": "k",
        "cache": "cold",
        "bytes_moved": bytes_moved,
        "time_s": time_s,
        "time_ci_s": (time_s * (1 - rel_ci), time_s * (1 + rel_ci)),
        "samples_s": (time_s,) * samples,
        "peak_bps": peak_bps,
        "device_key": MI300X["device_key"],
        "device_name": MI300X["device_name"],
        "backend": "hip",
        "simulated": False,
        "queue_method": "flush kernel",
    }
    fields.update(changes)
    return Measurement(**fields)
