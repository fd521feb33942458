"""The simulated device's entry point: `open()`, which the backend registry calls for "sim".

Also the names tests import (the model's constants and classes), gathered from the modules of
this package (see its __init__). docs/simulated-device.md explains every option.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

from pytest_gpuperf.errors import Attempt, ConfigError, DeviceUnavailable
from pytest_gpuperf.runtime.devices import DeviceSpec, get_device
from pytest_gpuperf.simulate.backend import (
    ALIGNMENT,
    BASE_ADDRESS,
    SimBackend,
    SimEvent,
    SimStream,
    host_available_bytes,
)
from pytest_gpuperf.simulate.device_model import (
    DEFAULT_COMMON_FRACTION,
    DEFAULT_EFFICIENCY,
    DEFAULT_GPU_SPREAD,
    HOST_EVENT_S,
    HOST_LINK_BPS,
    HOST_SYNC_S,
    MODEL_VERSION,
    REFERENCE_EFFICIENCY,
    SEED_ENV,
    THROTTLE_CLOCK_FRACTION,
    THROTTLE_SLOWDOWN,
    DriftParts,
    SimSettings,
    resolve_seed,
)
from pytest_gpuperf.simulate.execute import FLUSH_ELEMENT_BYTES, SimKernel
from pytest_gpuperf.simulate.source import check_source


def open(  # the name every backend module exposes (runtime/__init__.py)
    device_index: int = 0,
    *,
    device: str | DeviceSpec = "mi300x",
    seed: int | str | None = None,
    run_spread: float | None = None,
    common_fraction: float = DEFAULT_COMMON_FRACTION,
    placement_fraction: float | None = None,
    jitter: float = 0.004,
    launch_overhead_s: float = 2e-6,
    host_launch_s: float = 4e-6,
    cache_speedup: float = 3.0,
    throttle_probability: float = 0.0,
    kernel_slowdown: Mapping[str, float] | None = None,
    kernel_efficiency: Mapping[str, float] | None = None,
    hang_kernels: Iterable[str] | None = None,
    fault_kernels: Iterable[str] | None = None,
    gpu_speeds: Sequence[float] = (1.0,),
    gpu_spread: float = DEFAULT_GPU_SPREAD,
    buffer_code_spread: float | None = None,
) -> SimBackend:
    """A simulated `device` (a key of devices.KNOWN_DEVICES, or a DeviceSpec).

    `seed=None` takes $GPUPERF_SIM_SEED, else a fresh random seed; `backend.seed` tells which.
    `run_spread=None` takes $GPUPERF_SIM_RUN_SPREAD, else 0.07. `common_fraction` and
    `placement_fraction` split the run-to-run variance (the code object gets the rest;
    `placement_fraction=None` leaves it 0.05). `kernel_slowdown` and `kernel_efficiency` are
    keyed by kernel name or fingerprint ("sha256:...", from
    `backend.kernel_fingerprint(kernel)`). `hang_kernels` never finish and `fault_kernels` leave
    a sticky device fault (by kernel name; also $GPUPERF_SIM_HANG and $GPUPERF_SIM_FAULT,
    comma-separated): fault injection for testing a run's behaviour on a misbehaving GPU.
    `gpu_speeds` makes several GPUs of one model (--gpuperf-sim-gpus), each at its speed
    relative to a healthy one; `device_index` picks one. `buffer_code_spread` (None:
    $GPUPERF_SIM_BUFFER_CODE_SPREAD, else 0) is how much one code object's time depends on where
    its buffers landed, per buffer allocation, not shared with other code: what an A/B pair's
    buffer sets measure. docs/simulated-device.md explains every option.
    """
    count = SimBackend.device_count(gpu_speeds=gpu_speeds)
    if not 0 <= int(device_index) < count:
        raise DeviceUnavailable(
            [Attempt("sim", f"device index {device_index} out of range: {count} simulated GPU(s)")],
            hint="simulated devices are numbered 0, 1, ...; --gpuperf-sim-gpus makes more",
        )
    spec = device if isinstance(device, DeviceSpec) else get_device(str(device))
    settings = SimSettings(
        device=spec,
        seed=resolve_seed(seed),
        run_spread=_run_spread(run_spread),
        common_fraction=float(common_fraction),
        placement_fraction=None if placement_fraction is None else float(placement_fraction),
        jitter=float(jitter),
        launch_overhead_s=float(launch_overhead_s),
        host_launch_s=float(host_launch_s),
        cache_speedup=float(cache_speedup),
        throttle_probability=float(throttle_probability),
        kernel_slowdown={str(k): float(v) for k, v in (kernel_slowdown or {}).items()},
        kernel_efficiency={str(k): float(v) for k, v in (kernel_efficiency or {}).items()},
        hang_kernels=_names(hang_kernels, HANG_ENV),
        fault_kernels=_names(fault_kernels, FAULT_ENV),
        gpu_speed=float(gpu_speeds[int(device_index)]),
        gpu_count=count,
        gpu_spread=float(gpu_spread),
        buffer_code_spread=_spread(buffer_code_spread, BUFFER_CODE_ENV),
    )
    return SimBackend(int(device_index), settings)


HANG_ENV, FAULT_ENV = "GPUPERF_SIM_HANG", "GPUPERF_SIM_FAULT"
BUFFER_CODE_ENV = "GPUPERF_SIM_BUFFER_CODE_SPREAD"


def _spread(given: float | None, variable: str) -> float:
    """The option given, else the environment's (for a pytest run on the simulated device),
    else 0; out-of-range values are refused by SimSettings."""
    if given is not None:
        return float(given)
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return 0.0
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(
            f"${variable} must be a fraction in [0, 1) (0.02: +-2% per buffer set), got {raw!r}"
        ) from None


# The run-to-run spread of a pytest run's simulated device (the plugin has no option for it):
# a quiet device lets a test show what a drift of 1% per commit looks like to the gate.
RUN_SPREAD_ENV = "GPUPERF_SIM_RUN_SPREAD"
DEFAULT_RUN_SPREAD = 0.07


def _run_spread(given: float | None) -> float:
    """The spread given, else $GPUPERF_SIM_RUN_SPREAD, else 0.07 (the MI300X's +-7%)."""
    if given is not None:
        return float(given)
    text = os.environ.get(RUN_SPREAD_ENV, "").strip()
    if not text:
        return DEFAULT_RUN_SPREAD
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(
            f"${RUN_SPREAD_ENV}={text!r} is not a number: give the simulated run-to-run "
            "spread as a fraction (0.002 is +-0.2%)"
        ) from None
    if not 0.0 <= value < 1.0:
        raise ConfigError(f"${RUN_SPREAD_ENV}={text!r} must be a fraction in [0, 1)")
    return value


def _names(given: Iterable[str] | None, variable: str) -> frozenset[str]:
    if given is not None:
        return frozenset(str(name) for name in given)
    return frozenset(n.strip() for n in os.environ.get(variable, "").split(",") if n.strip())


__all__ = [
    "ALIGNMENT",
    "BASE_ADDRESS",
    "DEFAULT_EFFICIENCY",
    "FLUSH_ELEMENT_BYTES",
    "HOST_EVENT_S",
    "HOST_LINK_BPS",
    "HOST_SYNC_S",
    "MODEL_VERSION",
    "REFERENCE_EFFICIENCY",
    "SEED_ENV",
    "THROTTLE_CLOCK_FRACTION",
    "THROTTLE_SLOWDOWN",
    "DriftParts",
    "SimBackend",
    "SimEvent",
    "SimKernel",
    "SimSettings",
    "SimStream",
    "check_source",
    "host_available_bytes",
    "open",
    "resolve_seed",
]
