"""The simulated device's model: its parameters, the noise, the caches and a kernel's time.

docs/simulated-device.md explains every parameter and formula; the numbers here cite their
public sources. Nothing here touches buffers or kernels' semantics (execute.py does) or the
Backend interface (backend.py does).
"""

from __future__ import annotations

import collections
import hashlib
import math
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.runtime.devices import DeviceSpec

# 2: run drift split into device-wide, placement and code parts; 3: the code part belongs
# to a module load (each load of the same code object draws its own), not to the code.
MODEL_VERSION = "3"
SEED_ENV = "GPUPERF_SIM_SEED"

# Efficiency of a kernel at streaming its bytes, as a fraction of the datasheet peak.
DEFAULT_EFFICIENCY = 0.80
# Only for the plugin's own kernels (kernels/ in the package), looked up by their name there.
REFERENCE_EFFICIENCY = {
    # rocprof "Bandwidth Efficiency" for 32M fp32 vector add on MI300X, from the blog post
    # "Making memory bound kernels go brr on a MI300X": 71.85% plain, 82.70% L2 bypass.
    "mi300x": {"vector_add": 0.7185, "vector_add_bypass": 0.8270},
    # Measured on the project's H100 SXM (32M fp32, NVRTC): scalar 0.806, float4 0.887.
    "h100-sxm": {"vector_add": 0.806, "vector_add_vec4": 0.887},
}

HOST_EVENT_S = 0.5e-6  # host time to record an event
HOST_SYNC_S = 1e-6  # host time to return from a synchronisation
HOST_LINK_BPS = 50e9  # host <-> device copies (PCIe Gen5 x16 as achieved, not its 64 GB/s)
THROTTLE_CLOCK_FRACTION = 0.75  # engine clock of a throttled run, as a fraction of its peak
THROTTLE_SLOWDOWN = 1.05  # memory-bound kernels lose little when the engine clock drops

# The run-to-run variance split (docs/simulated-device.md, "Noise"): device-wide, buffer
# placement, and the rest per code object. An assumption: the blog gives only the total.
DEFAULT_COMMON_FRACTION = 0.50
DEFAULT_CODE_FRACTION = 0.05
# How much healthy GPUs of one model differ from each other within one run, as a +-95% range
# per GPU: the same tests on two H200s of one machine (separate serial runs) gave time ratios
# of median 1.0016, range 0.9946-1.0066 over 19 measurements, most of it measurement noise.
DEFAULT_GPU_SPREAD = 0.005


@dataclass(frozen=True)
class SimSettings:
    """Every parameter of the model; docs/simulated-device.md explains each one.

    `placement_fraction=None` takes what `common_fraction` leaves after the default code
    share (0.05), never below 0; the code share is whatever the other two leave.
    `kernel_slowdown` and `kernel_efficiency` are keyed by kernel name or by a kernel's
    fingerprint ("sha256:..."); a fingerprint key wins over a name key.
    """

    device: DeviceSpec
    seed: int
    run_spread: float = 0.07
    common_fraction: float = DEFAULT_COMMON_FRACTION
    placement_fraction: float | None = None
    jitter: float = 0.004
    launch_overhead_s: float = 2e-6
    host_launch_s: float = 4e-6
    cache_speedup: float = 3.0
    throttle_probability: float = 0.0
    kernel_slowdown: Mapping[str, float] = field(default_factory=dict)
    kernel_efficiency: Mapping[str, float] = field(default_factory=dict)
    # Fault injection, to test what a run does when a GPU misbehaves (docs/reliability.md):
    # kernels (by name) that never finish, and kernels that leave a sticky device fault.
    hang_kernels: frozenset[str] = frozenset()
    fault_kernels: frozenset[str] = frozenset()
    # Several simulated GPUs (--gpuperf-sim-gpus): this one's speed relative to a healthy
    # GPU (0.95: every time / 0.95), how many there are, and how much healthy ones differ.
    gpu_speed: float = 1.0
    gpu_count: int = 1
    gpu_spread: float = DEFAULT_GPU_SPREAD
    # How one code object's time depends on where its buffers landed, as a +-95% range per
    # (code object, buffer allocation): not shared with other code, so an A/B pair of two
    # code objects on the same buffers does not cancel it, and a fresh set of buffers draws
    # it anew. 0 (the default): a placement moves every code object alike.
    buffer_code_spread: float = 0.0

    def __post_init__(self) -> None:
        if self.placement_fraction is None:
            rest = 1.0 - self.common_fraction - DEFAULT_CODE_FRACTION
            object.__setattr__(self, "placement_fraction", max(0.0, rest))
        checks = {
            "run_spread": self.run_spread >= 0,
            "common_fraction": 0 <= self.common_fraction <= 1,
            "placement_fraction": 0 <= self.placement_fraction <= 1,  # type: ignore[operator]
            "jitter": self.jitter >= 0,
            "launch_overhead_s": self.launch_overhead_s >= 0,
            "host_launch_s": self.host_launch_s >= 0,
            "cache_speedup": self.cache_speedup >= 1,
            "throttle_probability": 0 <= self.throttle_probability <= 1,
            "gpu_speed": math.isfinite(self.gpu_speed) and 0 < self.gpu_speed <= 10,
            "gpu_count": self.gpu_count >= 1,
            "gpu_spread": 0 <= self.gpu_spread < 1,
            "buffer_code_spread": 0 <= self.buffer_code_spread < 1,
        }
        for option, valid in checks.items():
            if not valid:
                raise ConfigError(
                    f"simulated device option {option}={getattr(self, option)!r} is out of "
                    "range; docs/simulated-device.md gives each option's meaning and range"
                )
        if self.common_fraction + self.placement_fraction > 1 + 1e-12:  # type: ignore[operator]
            raise ConfigError(
                f"simulated device options common_fraction={self.common_fraction!r} and "
                f"placement_fraction={self.placement_fraction!r} add up to more than 1: they "
                "are shares of one variance, and the code object's share is what they leave"
            )
        for key, factor in self.kernel_slowdown.items():
            if not (math.isfinite(factor) and factor > 0):
                raise ConfigError(
                    f"simulated device option kernel_slowdown[{key!r}]={factor!r} must be "
                    "a time factor > 0 (1.10 is 10% slower)"
                )
        for key, efficiency in self.kernel_efficiency.items():
            if not 0 < efficiency <= 1:
                raise ConfigError(
                    f"simulated device option kernel_efficiency[{key!r}]={efficiency!r} "
                    "must be a fraction in (0, 1]"
                )

    @property
    def run_sigma(self) -> float:
        """Log-sigma of the run drift: "+-7%" is read as a 95% (about 2 sigma) range."""
        return self.run_spread / 2

    @property
    def code_fraction(self) -> float:
        """The share of the run drift's variance drawn per code object."""
        return max(0.0, 1.0 - self.common_fraction - float(self.placement_fraction or 0.0))

    def slowdown(self, fingerprint: str, name: str) -> float:
        return self.kernel_slowdown.get(fingerprint, self.kernel_slowdown.get(name, 1.0))

    def efficiency_option(self, fingerprint: str, name: str) -> float | None:
        return self.kernel_efficiency.get(fingerprint, self.kernel_efficiency.get(name))


def resolve_seed(seed: int | str | None) -> int:
    """The seed given, else $GPUPERF_SIM_SEED, else a fresh random one (exposed so a run
    can be reproduced)."""
    if seed is None:
        seed = os.environ.get(SEED_ENV) or None
        where = f"${SEED_ENV}"
    else:
        where = "seed"
    if seed is None:
        return secrets.randbits(32)
    try:
        value = int(seed)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} must be a non-negative integer, got {seed!r}") from None
    if value < 0:
        raise ConfigError(f"{where} must be a non-negative integer, got {seed!r}")
    return value


@dataclass(frozen=True)
class DriftParts:
    """A launch's run-drift factors (1.0 = nominal); `total` multiplies them."""

    common: float
    placement: float
    code: float
    buffer_code: float = 1.0  # this code object on these buffers (buffer_code_spread)

    @property
    def total(self) -> float:
        return self.common * self.placement * self.code * self.buffer_code


# Streams of random numbers, one per purpose, so no draw depends on what else ran.
_COMMON, _CODE, _JITTER, _PLACEMENT, _GPU, _BUFFER_CODE = 0, 1, 2, 3, 4, 5


class Noise:
    """Run drift in three seeded parts, and per-launch jitter.

    log drift = c + p(buffers) + k(code object), with s = run_spread / 2:
      c ~ N(0, f_c s^2)   once per run (clocks, power state): common to every launch;
      p = sum(w_i p_i) / sqrt(sum(w_i^2)), p_i ~ N(0, f_p s^2) once per buffer allocation
          (where it landed in HBM), w_i the bytes the launch touches in buffer i;
      k ~ N(0, f_k s^2)   from (seed, code key): one draw per module load of a code object
          (its fingerprint and load number), so loading the same bytes again draws anew;
      q = sum(w_i q_i) / sqrt(sum(w_i^2)), q_i ~ N(0, (buffer_code_spread / 2)^2) once per
          (code object, buffer allocation): how this code's accesses meet where buffer i
          landed, the same for every load of the code, drawn anew for a fresh buffer.
    Jitter: exp(jitter * N(0, 1)) per launch.
    Several GPUs of one run (gpu_count > 1) share c and k (one machine, one code object) and
    each adds its own g ~ N(0, (gpu_spread / 2)^2) and its speed: GPU 0 draws c as a lone GPU.
    """

    def __init__(self, settings: SimSettings, device_index: int) -> None:
        self.settings = settings
        self.device_index = device_index
        sigma = settings.run_sigma
        self._sigmas = {
            _COMMON: sigma * math.sqrt(settings.common_fraction),
            _PLACEMENT: sigma * math.sqrt(float(settings.placement_fraction or 0.0)),
            _CODE: sigma * math.sqrt(settings.code_fraction),
        }
        run_rng = self._rng(_COMMON)
        own_common = float(run_rng.standard_normal())
        self.throttled = bool(run_rng.random() < settings.throttle_probability)
        if settings.gpu_count > 1:
            shared = float(self._shared_rng(_COMMON).standard_normal())
            own_gpu = float(self._rng(_GPU).standard_normal())
            self.common_log = (
                self._sigmas[_COMMON] * shared
                + settings.gpu_spread / 2 * own_gpu
                - math.log(settings.gpu_speed)
            )
        else:
            self.common_log = self._sigmas[_COMMON] * own_common - math.log(settings.gpu_speed)
        self._jitter_rng = self._rng(_JITTER)
        self._code_log: dict[str, float] = {}
        self._placement_log: dict[int, float] = {}
        self._buffer_code_log: dict[tuple[str, int], float] = {}

    def _rng(self, stream: int, *key: int) -> np.random.Generator:
        return np.random.default_rng([self.settings.seed, stream, self.device_index, *key])

    def _shared_rng(self, stream: int, *key: int) -> np.random.Generator:
        """The stream every GPU of the run shares (GPU 0's, so one GPU is drawn as before)."""
        return np.random.default_rng([self.settings.seed, stream, 0, *key])

    def code_log(self, code_key: str) -> float:
        if code_key not in self._code_log:
            digest = int.from_bytes(hashlib.sha256(code_key.encode()).digest()[:8], "big")
            draw = float(self._shared_rng(_CODE, digest).standard_normal())
            self._code_log[code_key] = self._sigmas[_CODE] * draw
        return self._code_log[code_key]

    def placement_log(self, allocation: int) -> float:
        """The placement draw of the `allocation`-th allocation of this run (0, 1, ...)."""
        if allocation not in self._placement_log:
            draw = float(self._rng(_PLACEMENT, allocation).standard_normal())
            self._placement_log[allocation] = self._sigmas[_PLACEMENT] * draw
        return self._placement_log[allocation]

    def buffer_code_log(self, code: str, allocation: int) -> float:
        """Code object `code` (its fingerprint: every load alike) on the `allocation`-th
        allocation of this run."""
        sigma = self.settings.buffer_code_spread / 2
        if not sigma:
            return 0.0
        key = (code, allocation)
        if key not in self._buffer_code_log:
            digest = int.from_bytes(hashlib.sha256(code.encode()).digest()[:8], "big")
            draw = float(self._rng(_BUFFER_CODE, digest, allocation).standard_normal())
            self._buffer_code_log[key] = sigma * draw
        return self._buffer_code_log[key]

    def forget(self, allocation: int) -> None:
        self._placement_log.pop(allocation, None)
        for key in [k for k in self._buffer_code_log if k[1] == allocation]:
            del self._buffer_code_log[key]

    def parts(self, code_key: str, touched: Mapping[int, int], code: str = "") -> DriftParts:
        """The drift of the load `code_key` of code object `code` (its fingerprint; ""
        takes `code_key`) touching {allocation: bytes}."""
        weights = {a: float(b) for a, b in touched.items() if b > 0}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        placement = (
            sum(w * self.placement_log(a) for a, w in weights.items()) / norm if norm else 0.0
        )
        own = code or code_key
        buffer_code = (
            sum(w * self.buffer_code_log(own, a) for a, w in weights.items()) / norm
            if norm
            else 0.0
        )
        return DriftParts(
            math.exp(self.common_log),
            math.exp(placement),
            math.exp(self.code_log(code_key)),
            math.exp(buffer_code),
        )

    def launch_jitter(self) -> float:
        return math.exp(self.settings.jitter * float(self._jitter_rng.standard_normal()))


class LruCache:
    """All caches as one LRU over whole buffers (bytes touched per buffer).

    A buffer at least as large as the caches streams through them and leaves nothing a later
    launch could hit: under LRU, re-reading it sequentially misses everywhere.
    """

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.resident: collections.OrderedDict[int, int] = collections.OrderedDict()
        self.resident_bytes = 0

    def access(self, ptr: int, nbytes: int, size: int | None = None) -> int:
        """Touch `nbytes` of buffer `ptr` (of `size` bytes; at most that much can stay
        resident); returns how many of them were cache hits."""
        held = self.resident.pop(ptr, 0)
        self.resident_bytes -= held
        if nbytes >= self.capacity_bytes:
            self.clear()
            return 0
        kept = max(held, nbytes)
        self.resident[ptr] = kept if size is None else min(kept, size)
        self.resident_bytes += self.resident[ptr]
        while self.resident_bytes > self.capacity_bytes:
            _, evicted = self.resident.popitem(last=False)
            self.resident_bytes -= evicted
        return min(held, nbytes)

    def evict(self, ptr: int) -> None:
        self.resident_bytes -= self.resident.pop(ptr, 0)

    def clear(self) -> None:
        self.resident.clear()
        self.resident_bytes = 0


@dataclass(frozen=True)
class Access:
    """Bytes one launch touches in one buffer."""

    ptr: int
    allocation: int  # the buffer's allocation number (its placement draw)
    nbytes: int
    size: int  # the buffer's size


def transfer_s(
    accesses: Sequence[Access], cache: LruCache, peak_bps: float, efficiency: float, speedup: float
) -> float:
    """Seconds to move the accesses' bytes: misses at peak x efficiency, hits `speedup`
    times faster (docs/simulated-device.md, "Kernel time")."""
    hit_bytes = miss_bytes = 0
    for access in accesses:
        hit = cache.access(access.ptr, access.nbytes, access.size)
        hit_bytes += hit
        miss_bytes += access.nbytes - hit
    memory_bps = peak_bps * efficiency
    return miss_bytes / memory_bps + hit_bytes / (memory_bps * speedup)
