"""How an A/B pair samples: one policy for the `gpu_bench` fixture and the library.

A pair samples until the gate's state is known (gate/ab.py's rule) or its budget is spent.
The fixture (session/fixture.py) and `Device.compare` (session/api.py) both measure through
`measure_launch_ab` with a `PairPolicy`, so a kernel compared through the library gets the
budget and the pair limit the fixture gives it, and stops (decided or not) where the fixture
would.
It lives in the gate because the stopping rule is the gate's; the engine only samples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_gpuperf.engine.launch import Launch
from pytest_gpuperf.engine.measure import (
    MeasureSettings,
    measure_callable_pair,
    measure_launch_pair,
)
from pytest_gpuperf.engine.policy import DEFAULT_PAIR_LOADS
from pytest_gpuperf.engine.results import PairedComparison
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.ab import decided, pair_code_spread
from pytest_gpuperf.runtime.base import Backend, Kernel

# The most head/base pairs an A/B measurement samples (docs/benchmarks.md#ab-pair-budget).
PAIR_MAX_SAMPLES = 20000
# A pair that is still undecided may sample for 4 budgets of one kernel (both kernels share
# them); a decided one stops at once, so only the undecided pay.
# Why 4: docs/benchmarks.md#ab-pair-budget
PAIR_BUDGETS = 4.0


@dataclass(frozen=True)
class PairPolicy:
    """What an A/B pair samples with.

    threshold: stop once the gate's state at this threshold is known (None: sample until the
      head's interval is tight or the budget is spent, the gate not asked).
    code_spread: the assumed code-object spread for a pair with too few loads to measure it
      (None: the backend's; gate/ab.py's pair_code_spread).
    loads, buffer_sets: loads per side, and the buffer sets they run on (engine.measure_pair).
    budgets: the pair's wall-clock budget in budgets of one kernel (MeasureSettings.budget_s).
    max_samples: the most pairs (the kernel's own max_samples, when larger, wins).
    """

    threshold: float | None = None
    code_spread: float | None = None
    loads: int = DEFAULT_PAIR_LOADS
    buffer_sets: int | None = None
    budgets: float = PAIR_BUDGETS
    max_samples: int = PAIR_MAX_SAMPLES

    def __post_init__(self) -> None:
        if not self.budgets > 0:
            raise ConfigError(f"an A/B pair's budgets must be positive, got {self.budgets!r}")
        if self.max_samples < 3:
            raise ConfigError(f"an A/B pair needs max_samples >= 3, got {self.max_samples!r}")

    def settings(self, kernel: MeasureSettings, confidence: float) -> MeasureSettings:
        """The pair's settings from one kernel's: `budgets` times its budget, at least
        `max_samples` pairs (a pair's ratio is noisier than one kernel's time), its interval at
        `confidence`."""
        hard = kernel.hard_limit_s
        return replace(
            kernel,
            budget_s=self.budgets * kernel.budget_s,
            hard_limit_s=None if hard is None else self.budgets * hard,
            max_samples=max(kernel.max_samples, self.max_samples),
            confidence=confidence,
        )

    def stop_when(
        self, backend: Backend, head: Kernel, base: Kernel
    ) -> Callable[[tuple[float, float], float], bool] | None:
        """The gate's stopping rule for this pair (None without a threshold)."""
        if self.threshold is None:
            return None
        return self.stop_for(
            backend, backend.kernel_fingerprint(head), backend.kernel_fingerprint(base)
        )

    def stop_for(
        self, backend: Backend, head_fingerprint: str, base_fingerprint: str, loads: int = 0
    ) -> Callable[[tuple[float, float], float], bool] | None:
        """The stopping rule for a pair of these fingerprints on `loads` loads a side (0: the
        policy's), the rule gate/ab.py judges it by."""
        if self.threshold is None:
            return None
        spread = pair_code_spread(
            backend.info.backend,
            head_fingerprint,
            base_fingerprint,
            self.code_spread,
            loads or self.loads,
        )
        return decided(self.threshold, spread)


def measure_ab(
    backend: Backend,
    head: Kernel,
    base: Kernel,
    *,
    policy: PairPolicy,
    settings: MeasureSettings,
    confidence: float,
    seed: int = 0,
    **keywords: Any,
) -> PairedComparison:
    """`measure_launch_ab` for a script that gives the launch as measure_pair's keywords
    (grid, block, args, bytes_moved, device, name, shared_bytes, setup)."""
    launch, measured = Launch.split(keywords)
    return measure_launch_ab(
        backend,
        head,
        base,
        launch,
        policy=policy,
        settings=settings,
        confidence=confidence,
        seed=seed,
        **measured,
    )


def measure_launch_ab(
    backend: Backend,
    head: Kernel,
    base: Kernel,
    launch: Launch,
    *,
    policy: PairPolicy,
    settings: MeasureSettings,
    confidence: float,
    seed: int = 0,
    **measured: Any,
) -> PairedComparison:
    """An A/B pair of `head` and `base` on one `launch`, sampled by `policy` from one kernel's
    `settings`, its interval at `confidence`; `measured` is measure_launch_pair's
    bytes_moved, device and name."""
    return measure_launch_pair(
        backend,
        head,
        base,
        launch,
        settings=policy.settings(settings, confidence),
        stop_when=policy.stop_when(backend, head, base),
        seed=seed,
        loads=policy.loads,
        buffer_sets=policy.buffer_sets,
        **measured,
    )


def measure_callable_ab(
    backend: Backend,
    head: Sequence[Callable[[], Any]],
    base: Sequence[Callable[[], Any]],
    *,
    policy: PairPolicy,
    settings: MeasureSettings,
    confidence: float,
    seed: int = 0,
    head_fingerprint: str = "",
    base_fingerprint: str = "",
    **call: Any,
) -> PairedComparison:
    """An A/B pair of two versions of a callable, sampled by `policy` as a kernel's pair is:
    `head[i]` against `base[i]` is load i (a capture a side, each on buffers its own test
    body made), so with >= 3 a side the drift between captures is measured as a kernel's
    loads and buffer sets measure theirs, and the threshold is not widened for an assumed
    one; `call` is measure_callable_pair's (bytes_moved, device, name, setup, base_setup:
    one per load)."""
    return measure_callable_pair(
        backend,
        list(head),
        list(base),
        settings=policy.settings(settings, confidence),
        stop_when=policy.stop_for(backend, head_fingerprint, base_fingerprint, loads=len(head)),
        seed=seed,
        head_fingerprint=head_fingerprint,
        base_fingerprint=base_fingerprint,
        **call,
    )
