"""The inputs gpuperf_check.hip's fill kernel makes, in NumPy, bit for bit.

A counter-based hash (lowbias32) turns an element index and a seed into the same float32 on
every backend and here: the perf suite's inputs are made on the device
(`session/device_data.py`), the simulated device makes them with this module, and a failure
is explained with the same values made on the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pytest_gpuperf.errors import ConfigError

_MIX1, _MIX2, _GOLDEN = np.uint32(0x7FEB352D), np.uint32(0x846CA68B), np.uint32(0x9E3779B9)
_CHUNK = 1 << 22  # elements per pass of the NumPy hash: its temporaries stay small


# -- the hash, in NumPy: bit for bit what gpuperf_check.hip computes -----------------------------


def _mix32(x: np.ndarray) -> np.ndarray:
    """lowbias32 on uint32 words, in place (wrapping multiplies, as on the device)."""
    x ^= x >> np.uint32(16)
    x *= _MIX1
    x ^= x >> np.uint32(15)
    x *= _MIX2
    x ^= x >> np.uint32(16)
    return x


def hash_bits(seed: int, count: int, start: int = 0) -> np.ndarray:
    """gp_hash(i, seed) for i in [start, start + count), as uint32."""
    out = np.empty(count, dtype=np.uint32)
    done = 0
    while done < count:  # per run of indices that share their high 32 bits: one stream word
        first = start + done
        high, low = first >> 32, first & 0xFFFFFFFF
        size = min(count - done, 2**32 - low)
        word = _mix32(np.array([(high + 0x9E3779B9) & 0xFFFFFFFF], dtype=np.uint32))
        word ^= np.uint32(seed & 0xFFFFFFFF)
        stream = _mix32(word)[0]
        part = out[done : done + size]
        part[:] = np.arange(low, low + size, dtype=np.uint32)
        part ^= stream
        _mix32(part)
        done += size
    return out


@dataclass(frozen=True)
class Values:
    """`count` float32 inputs made by gpuperf_fill_values from `seed`: magnitudes in
    [low, low + width), uniform on a grid of width / 2^24, negative at random when `signed`.
    `width` is a power of two, so the device's arithmetic (fused or not) and NumPy's agree
    exactly; `low` > 0 keeps every value away from zero (relative tolerances hold)."""

    count: int
    seed: int
    low: float = 0.1
    width: float = 1.0
    signed: bool = True

    def __post_init__(self) -> None:
        if not (self.width > 0 and math.frexp(self.width)[0] == 0.5):
            raise ConfigError(f"Values: width {self.width} is not a power of two")
        if not self.low >= 0:
            raise ConfigError(f"Values: low {self.low} must be >= 0 (the sign is drawn)")
        if self.count < 0 or not 0 <= self.seed < 2**32:
            raise ConfigError(f"Values: count {self.count} and seed {self.seed} must fit uint")

    @property
    def scale(self) -> float:
        return self.width / 2**24

    def host(self) -> np.ndarray:
        """The same values made by NumPy (to explain a failure, and for the tests)."""
        out = np.empty(self.count, dtype=np.float32)
        for start in range(0, self.count, _CHUNK):
            bits = hash_bits(self.seed, min(_CHUNK, self.count - start), start)
            out[start : start + bits.size] = values_from_bits(
                bits, self.low, self.scale, self.signed
            )
        return out


def values_from_bits(bits: np.ndarray, low: float, scale: float, signed: bool) -> np.ndarray:
    """What gpuperf_fill_values makes of hash words: float32 arithmetic, as on the device.
    The sign: negation flips the sign bit alone, so setting it from the hash's lowest bit is
    the same (magnitudes are >= low >= 0)."""
    values = (bits >> np.uint32(8)).astype(np.float32)
    values *= np.float32(scale)
    values += np.float32(low)
    if signed:
        values.view(np.uint32)[...] |= bits << np.uint32(31)
    return values
