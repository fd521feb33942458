"""Whether a callable waits for the device: the one fact that decides how it can be timed.

The engine keeps the device queue ahead of the host (a spin kernel in front of each batch,
timing.py) and drops every sample whose launch may have found the device idle. Work that
synchronises the host while it runs (PyTorch's `.item()`, `.cpu()`, `nonzero`, a boolean
mask, a `cudaFree`, Triton's autotuner meeting a new key) drains that queue itself: behind a
spin, each such call waits for the spin to end, so every sample is dropped and a pair never
gets one (a real library's cross-entropy sampled for 170 s on a 4 s budget that way).

The probe asks the question directly. It times one call on an idle device, then one call
queued behind a spin several times longer: a call that does not wait returns as fast as
before, one that waits returns only after the spin. Two such calls must agree. Such work is
then timed as it runs (timing.py's `Timed.as_it_runs`: one event pair around each call, no
spin in front, every sample kept), so what the pair holds is what the call costs a program,
the host's waits and the launches after them included; the report names the method. A
`setup=` that waits is refused instead: it runs before every timed launch, and after it no
launch can find the queue busy.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_gpuperf.engine.timing import Engine

# The spin behind which a probing call is queued: 4x the call's own host time, within these
# bounds (long enough that a waiting call's return is unmistakably late, short enough to cost
# little; a call that spends more than SPIN_PROBE_MAX_S / 4 on the host cannot be kept ahead
# by a spin anyway, and the starved probe decides it).
SPIN_PROBE_MIN_S = 5e-3
SPIN_PROBE_MAX_S = 0.25
# A call returned this fraction of the spin later than on an idle device: it waited.
LATE_FRACTION = 0.5
PROBE_VOTES = 2


def waits_on_device(engine: Engine, call: Callable[[], object], clock: Callable[[], float]) -> bool:
    """Whether `call()` waits for work queued before it (it synchronises the host).

    `call` must have run once already (compiles, autotuning and module loads stay out of its
    time); it runs 2 + PROBE_VOTES more times here, and the device is idle when this returns."""
    backend = engine.backend
    free_s = []
    for _ in range(2):  # on an idle device: its own host time (and device time, if it waits)
        backend.synchronize()
        began = clock()
        call()
        free_s.append(clock() - began)
    backend.synchronize()
    own_s = min(free_s)
    spin_s = min(max(4 * own_s, SPIN_PROBE_MIN_S), SPIN_PROBE_MAX_S)
    for _ in range(PROBE_VOTES):
        engine.launch_spin(spin_s)
        began = clock()
        call()
        late_s = clock() - began - own_s
        backend.synchronize()
        if late_s < LATE_FRACTION * spin_s:
            return False
    return True
