"""The gate's checks of one measurement, as data: the floor, the stored baseline (with the
noise band it was judged by and a drift across saves) and the A/B comparison against a base
revision, with the words (outcomes, states, reasons) they are decided in.

The gate (`pytest_gpuperf.gate`) is the only code that builds them; renderers and the
offline commands read them, from the run or from its JSON report (record/json_report.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gpuperf.baseline.ref import BaselineRef, TrailPoint

# Stored-baseline outcomes.
NO_BASELINE, OTHER_DEVICE, WITHIN_NOISE, REGRESSED, IMPROVED = (
    "no-baseline",
    "other-device",
    "within-noise",
    "regressed",
    "improved",
)
# A/B states (--gpuperf-compare): head against the base revision's build of the same kernel.
AB_PASS, AB_REGRESSED, AB_IMPROVED, AB_INCONCLUSIVE, AB_NO_BASE, AB_UNCHANGED = (
    "pass",
    "regressed",
    "improved",
    "inconclusive",
    "no-base",
    "unchanged",
)
# Different code objects that a device computing its times from a model (the simulated one)
# times from the same model: it cannot see the change. Never fails, never reads as a pass.
AB_MODELLED = "modelled"
# Every outcome and every state, for a reader that checks a stored one is known.
BASELINE_OUTCOMES = (NO_BASELINE, OTHER_DEVICE, WITHIN_NOISE, REGRESSED, IMPROVED)
AB_STATES = (
    AB_PASS,
    AB_REGRESSED,
    AB_IMPROVED,
    AB_INCONCLUSIVE,
    AB_NO_BASE,
    AB_UNCHANGED,
    AB_MODELLED,
)
# The statistic of a timed pair (ComparisonCheck.statistic).
STATISTIC_TRIMMED_MEAN = "10%-trimmed mean of log ratios, nested over module loads"
# Why an A/B comparison has no base (ComparisonCheck.no_base_why).
NO_BASE_REF, NO_BASE_FILE, NO_BASE_KERNEL, NO_BASE_COMPILE, NO_BASE_CALLABLE = (
    "ref",
    "file",
    "kernel",
    "compile",
    "callable",
)


@dataclass(frozen=True)
class Drift:
    """A drift across saves (gate/drift.py): the entry's level fell by `change` (relative,
    negative) from the level saved at `since_commit` to now, beyond `allowance` (the noise of
    the two levels at `false_alarm_rate`, at least the tolerance), through `steps` (the trail
    from that level on, the entry last), of which the largest single drop was `largest_step`;
    `gradual` when every step was within its own allowance (each re-save looked harmless)."""

    change: float
    allowance: float
    since_commit: str
    since_when: str
    steps: tuple[TrailPoint, ...]
    largest_step: float
    gradual: bool
    false_alarm_rate: float


@dataclass(frozen=True)
class FloorCheck:
    """The floor (min_bw) decision: `status` PASS, FAIL or MARGINAL (interval straddles)."""

    floor: float
    status: str
    efficiency: float
    efficiency_ci: tuple[float, float]
    straddles: bool = False
    origin: str = "min_bw"  # where the floor came from: "min_bw", "min_bw(name=...)", "floor="
    hot_floor: bool = False  # a hot-mode floor against the HBM peak: warned about


@dataclass(frozen=True)
class NoiseBand:
    """How much drop noise alone explains against a stored baseline, and why (gate/noise.py).

    The run-to-run spread `sigma` (a standard deviation of log efficiency) is a posterior: a
    prior (`prior_source` "backend": the backend's figure for a first save, or "file": the
    spread pooled over the file's other entries) worth `prior_df` degrees of freedom, combined
    with the entry's own `saves` (`history_df` = saves - 1 degrees of freedom). `noise` is a
    one-sided prediction bound for one new run at `false_alarm_rate`:
    `quantile` (Student's t with `df` degrees of freedom) x max(sigma, this run's own
    uncertainty) x `centre_factor` (the uncertainty of the centre, a median of `saves`).
    `basis` names what decided: "prior" (the backend's figure alone), "history" (the entry's
    saves with the backend's figure as prior), "pooled" (the file's pooled spread as prior).
    `df` and `prior_df` are 0 where the prior is known exactly (the simulated device's own
    setting): the quantile is then the normal one.
    """

    basis: str
    noise: float
    sigma: float
    df: float
    quantile: float
    centre_factor: float
    saves: int
    false_alarm_rate: float
    prior_source: str  # "backend" | "file" | "entry" (its run_spread as written) | "reported"
    prior_sigma: float
    prior_df: float
    history_sigma: float = 0.0
    history_df: int = 0
    pooled_entries: int = 0
    measured_sigma: float = 0.0  # this run's own uncertainty, when it exceeds sigma
    pool_refused_p: float = 0.0  # > 0: the file's pool was refused, the saves scatter more (p)
    # > 0: the backend's figure counted only as a guess (policy.PRIOR_DF), the saves scatter
    # more than it (p)
    prior_refused_p: float = 0.0
    # > 0: the band the file's pool (`pooled_entries` entries) would give, wider than this
    # one and therefore set aside (a noisier neighbour never raises a steadier entry's band)
    pool_set_aside: float = 0.0
    # Noise by level: "seen" (the run's board made saves: sigma, the run-to-run spread on one
    # board, alone) or "unseen" / "unrecorded" / "unknown" (the spread between boards of the
    # model is added: `between_sigma`, a standard deviation of log efficiency, from
    # `between_source` "file" (saves on several boards, with the measured figure as prior) or
    # "figure" (the project's measured figure, or the simulated device's setting), worth
    # `between_df` degrees of freedom (0: known exactly)). `board_added` is the +-95% range
    # the board term adds, as the failure text quotes it.
    board_status: str = ""
    between_sigma: float = 0.0
    between_df: float = 0.0
    between_source: str = ""
    between_figure: str = ""  # where the figure comes from (policy.BETWEEN_BOARD_SOURCE)
    boards: int = 0


@dataclass(frozen=True)
class BaselineCheck:
    """The stored-baseline decision (`outcome` one of the baseline outcomes above).

    `gating` is False where the baseline is shown for information only (an A/B comparison
    gates instead, or a simulated number beside a real device's entry).
    """

    outcome: str
    baseline: BaselineRef | None = None
    device_key: str = ""  # the baseline file judged against ("mi300x", "mi300x-sim")
    delta: float | None = None  # efficiency / baseline - 1 (-0.05: 5% less efficient)
    allowance: float | None = None  # the drop tolerated before failing
    tolerance: float = 0.0
    noise: float | None = None  # the part of the allowance the noise explains
    strict: bool = False
    gating: bool = True
    elsewhere: tuple[str, ...] = ()  # device keys that hold a baseline for it
    info: BaselineRef | None = None  # a real/reported entry shown beside a simulated number
    false_alarm_rate: float = 0.0  # the one-sided level the allowance was set at (0: unknown)
    # Confirmation (gate/confirm.py): a REGRESSED first round is measured again before the
    # test fails. `outcome` is then the final word, `first_outcome` the first round's, and
    # `confirmation` the second round's check (None: not measured again, `unconfirmed` why).
    first_outcome: str = ""
    confirmation: BaselineCheck | None = None
    unconfirmed: str = ""
    band: NoiseBand | None = None  # how `noise` was reached (None without a baseline)
    # The simulated device, and the entry was saved from other code (its fingerprint
    # differs) whose model is unchanged: the time restates the model, not the edit.
    modelled: bool = False
    drift: Drift | None = None  # a drift across the entry's replaced baselines, if any


@dataclass(frozen=True)
class ComparedFile:
    """One repository file a callable's A/B compared with REF (relative to the repository)
    and the ways it came to be compared: "imported" (the test's imports reach it), "ran"
    (a function of it ran in the test's setup, body or the callable's first call), "fixtures"
    (it defines a fixture the test uses), "opened" (read by the test), "kernel"
    (gpu_bench.kernel loaded it)."""

    path: str
    ways: tuple[str, ...] = ()


@dataclass(frozen=True)
class ComparisonCheck:
    """The A/B decision against --gpuperf-compare=REF (`state` one of the AB_* states)."""

    state: str
    ref: str
    ref_commit: str = ""
    threshold: float = 0.0
    ratio: float | None = None  # head time / base time
    ratio_ci: tuple[float, float] | None = None
    pairs: int = 0
    head_efficiency: float | None = None
    base_efficiency: float | None = None
    base_time_s: float | None = None
    head_fingerprint: str = ""
    base_fingerprint: str = ""
    forced: bool = False  # timed although the code objects are identical
    no_base_why: str = ""  # NO_BASE_* when state is AB_NO_BASE
    detail: str = ""  # the tool's own words for a missing base (git's or the compiler's)
    strict: bool = False
    code_spread: float = 0.0  # the code-object drift the threshold was widened for (+-95%)
    confidence: float = 0.95  # of ratio_ci; its one tail is the round's false-alarm level
    # Confirmation (gate/confirm.py): a REGRESSED first round is measured again, on freshly
    # loaded code objects and fresh buffers, before the test fails. `state` is then the final
    # word, `first_state` the first round's, `confirmation` the second round's check (None:
    # not measured again, `unconfirmed` says why).
    first_state: str = ""
    confirmation: ComparisonCheck | None = None
    unconfirmed: str = ""
    # AB_MODELLED: the model both sides' times come from (schema version 3)
    modelled_efficiency: float | None = None
    modelled_by: str = ""  # "option", "directive", "model", "reference" or "default"

    # What decided `threshold` (gate.policy.BASIS_*): "user", the user's own
    # (`user_threshold`, --gpuperf-compare-threshold), or a widening: "quantum" (a launch's
    # jitter, for a very short kernel) or "drift" (an assumed code drift, where too few
    # loads measured it).
    user_threshold: float = 0.0
    threshold_basis: str = ""
    # The drift between module loads, +-95% per side's load, and where it came from:
    # DRIFT_MEASURED (estimated from `loads` loads per side, carried in `ratio_ci`),
    # DRIFT_ASSUMED (policy / --gpuperf-compare-code-spread, in the threshold) or DRIFT_NONE.
    drift: float = 0.0
    drift_basis: str = ""
    loads: int = 0
    # Buffer sets the loads were spread over (load j on set j % buffer_sets): with one per
    # load, `drift` and `ratio_ci` carry where the buffers landed as well (0: not timed).
    buffer_sets: int = 0
    buffer_sets_note: str = ""
    statistic: str = ""  # STATISTIC_TRIMMED_MEAN for a timed pair
    median_ratio: float | None = None
    # Both sides' samples, in pair order (head's are the measurement's samples_s), and the
    # load each pair ran on: enough to recompute the statistic.
    base_samples_s: tuple[float, ...] = ()
    pair_loads: tuple[int, ...] = ()
    # A callable's A/B (gpu_bench.run): the repository files of the test's Python that differ
    # at REF (session/callable_code.py); empty for a kernel's.
    changed_files: tuple[str, ...] = ()
    # A callable's A/B: every file compared with REF, and why the set may lack a file the
    # test ran ("" when the run saw everything; then "same code" never switched the stored
    # baseline off: the pair was timed and the stored baseline gates beside it).
    compared_files: tuple[ComparedFile, ...] = ()
    incomplete: str = ""

    @property
    def confirmed(self) -> bool:
        """A regression that a second round agreed with."""
        return self.confirmation is not None and self.state == AB_REGRESSED
