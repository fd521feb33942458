"""The values that flow from the measurement engine to the gate and from the gate to reports.

Frozen dataclasses with units in their names; efficiency is a fraction. The gate
(`pytest_gpuperf.gate`) is the only code that builds a `Verdict` or its checks: everything
downstream (terminal, Markdown, JSON, JUnit, pytest-benchmark) only reads them, and text is
made by the renderers. `pytest_gpuperf.engine.plain` converts every class here to plain data
and back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pytest_gpuperf.engine.student_t import t_interval
from pytest_gpuperf.runtime.info import ClockReport, KernelResources

CACHE_MODES = ("cold", "hot", "rotate")


@dataclass(frozen=True)
class GpuIdentity:
    """Which GPU produced a measurement: its index in this process's runtime (after the
    visible-device mask), its PCI bus id and UUID where the runtime gives them, and whether the
    run's probe found it degraded (slower than its peers by more than --gpuperf-gpu-margin)."""

    index: int
    pci_bus_id: str | None = None
    uuid: str | None = None
    degraded: bool = False
    probe_ratio: float | None = None  # its probe bandwidth / the median of its peers'

    def describe(self) -> str:
        """'GPU 1 (0000:07:00.0)', with 'DEGRADED' and the probe ratio when it is."""
        text = f"GPU {self.index}" + (f" ({self.pci_bus_id})" if self.pci_bus_id else "")
        if self.degraded:
            ratio = f", {self.probe_ratio:.3f}x its peers" if self.probe_ratio else ""
            text += f" [DEGRADED{ratio}]"
        return text


@dataclass(frozen=True)
class Measurement:
    """One named measurement of one kernel (or callable) in one cache mode.

    `time_s` is the median per-launch kernel time; `time_ci_s` the distribution-free
    confidence interval of that median. Efficiency = bytes_moved / time_s / peak_bps.
    `fingerprint` identifies the kernel's code object ("" for callables): two measurements
    with the same fingerprint ran byte-identical machine code.
    """

    name: str
    kernel: str
    cache: str
    bytes_moved: int
    time_s: float
    time_ci_s: tuple[float, float]
    samples_s: tuple[float, ...]
    peak_bps: float
    device_key: str
    device_name: str
    backend: str
    simulated: bool
    queue_method: str  # how the device queue was kept ahead of the host for this mode
    warmup_count: int = 0
    stopped_by: str = ""  # "precision" | "budget" | "max_samples" | "decided" | "horizon"
    wall_s: float = 0.0
    rotation_copies: int = 0
    calibrated_efficiency: float | None = None
    reference_efficiency: float | None = None
    clocks: ClockReport | None = None
    resources: KernelResources | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    shared_bytes: int = 0
    outliers: int = 0
    fingerprint: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    gpu: GpuIdentity | None = None
    # Unix time (s) when the measurement's GPU work began and ended (warm-up included): on
    # one GPU no two measurements' intervals overlap, the GPU lock sees to that.
    started_s: float | None = None
    ended_s: float | None = None

    @property
    def bandwidth_bps(self) -> float:
        return self.bytes_moved / self.time_s

    @property
    def efficiency(self) -> float:
        return self.bandwidth_bps / self.peak_bps

    @property
    def efficiency_ci(self) -> tuple[float, float]:
        """Efficiency interval: the slow end of the time interval gives the low end."""
        low_s, high_s = self.time_ci_s
        return (self.bytes_moved / high_s / self.peak_bps, self.bytes_moved / low_s / self.peak_bps)

    @property
    def relative_ci(self) -> float:
        """Half-width of the time interval relative to the median (0.005 is +-0.5%)."""
        low_s, high_s = self.time_ci_s
        return (high_s - low_s) / 2 / self.time_s


@dataclass(frozen=True)
class PairedComparison:
    """Head against base, measured interleaved in one run (measure.measure_pair).

    Each pair is one head and one base sample taken back to back, in random order, on the
    same buffers, on one of `loads` separately loaded modules per side (`pair_loads[i]` is
    pair i's). `ratio` is exp of the mean over loads of the 10%-trimmed mean of the pairs'
    log(head time / base time) (> 1: head is slower), `ratio_ci` its interval at
    `confidence`: log_ratio +- t(df) log_ratio_se, which carries the drift between loads
    as this run measured it (`drift`, +-95% per side's load; `drift_basis` "measured" with
    3 or more loads, "none" below). Load j ran on buffer set j % `buffer_sets`, so with a
    set per load the drift includes where the buffers landed. `within_se` is what the pairs
    alone would say.
    `median_ratio` is the median of the pair ratios, for reference. `head` and `base`
    summarise each side; their samples are in pair order.
    """

    head: Measurement
    base: Measurement
    ratio: float
    ratio_ci: tuple[float, float]
    pairs: int
    confidence: float = 0.95
    stopped_by: str = ""
    loads: int = 1
    pair_loads: tuple[int, ...] = ()
    log_ratio: float = 0.0
    log_ratio_se: float = 0.0
    df: float = 0.0
    within_se: float = 0.0
    drift: float = 0.0
    drift_basis: str = ""
    median_ratio: float | None = None
    # Load j ran on buffer set j % buffer_sets (set 0: the caller's buffers); fewer sets than
    # asked for, and why, in `buffer_sets_note` (a setup=, device memory).
    buffer_sets: int = 1
    buffer_sets_note: str = ""

    def ratio_ci_at(self, confidence: float) -> tuple[float, float]:
        """The interval at another `confidence` (a suite-wide false-alarm budget sets a
        per-test level): the same estimate and error, another t quantile."""
        low, high = t_interval(self.log_ratio, self.log_ratio_se, self.df, confidence)
        return math.exp(low), math.exp(high)


# -- what the gate decides -------------------------------------------------------------------

# Verdict statuses: FAIL fails the test; MARGINAL passes with a warning (undecided at the
# budget, decided on the median); UNJUDGED: the test body failed, so its numbers were neither
# gated nor saved.
PASS, FAIL, MARGINAL, UNJUDGED = "pass", "fail", "marginal", "unjudged"
# MODELLED: nothing measured decided it (the simulated device timed changed code from an
# unchanged model): never a pass; pytest xfails the test, --gpuperf-strict fails it.
# ACCEPTED: a confirmed regression that --gpuperf-accept or a Gpuperf-Accept commit trailer
# names: the test passes, and every report lists it with its reason.
MODELLED, ACCEPTED = "modelled", "accepted"
# The checks an accepted slowdown may excuse: a regression, never a floor or a strict rule.
ACCEPTABLE_CHECKS = ("regression", "ab")
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
# Where an A/B comparison's drift came from (ComparisonCheck.drift_basis), and the statistic
# of a timed pair.
DRIFT_MEASURED, DRIFT_ASSUMED, DRIFT_NONE = "measured", "assumed", "none"
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
class TrailPoint:
    """One level in an entry's trail: a baseline it replaced (or, last, the entry itself):
    the centre of its saves, their spread (+-95%), how many, and its latest save's commit."""

    efficiency: float
    run_spread: float
    saves: int
    commit: str = ""
    when: str = ""
    board: str = ""  # the board of its latest save ("" unrecorded)


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
class BaselineRef:
    """The stored baseline a measurement was compared with (a view of one TOML entry).

    `saves` is how many measured saves of the same code its expected value and spread come
    from; `spread_basis` says whether `run_spread` was learned from them ("history") or is the
    backend's prior for a first save ("prior").
    """

    efficiency: float
    efficiency_ci: tuple[float, float]
    run_spread: float  # relative run-to-run spread, a +-range at ~95% (0.07 is +-7%)
    bandwidth_bps: float
    time_s: float
    cache: str
    source: str  # "measured" | "reported"
    provenance: str  # one line: when, commit, device, or the document it was reported in
    path: str
    device_key: str = ""
    saves: int = 1
    spread_basis: str = "prior"
    fingerprint: str = ""
    prior_spread: float = 0.0  # the backend's prior for this entry (0: unknown)
    # The spread of the saves' log efficiencies (a sample standard deviation, 0 below 2 saves)
    # and the backend that measured them (it sets how much the backend's prior is worth).
    history_sd: float = 0.0
    backend: str = ""
    # The file's pooled spread at this entry's kernel time: the other entries of the same file
    # and cache mode whose histories hold >= 2 saves (baseline/pool.py); a +-95% range, its
    # degrees of freedom and how many entries it pools (0: nothing to pool).
    pooled_spread: float = 0.0
    pooled_df: float = 0.0
    pooled_entries: int = 0
    # The degrees of freedom of history_sd (None: saves - 1, as before boards were recorded;
    # with boards it is the sum over boards of their saves - 1).
    history_df: int | None = None
    # The run's board (GPU UUID, "" unknown) and how it relates to the boards the saves were
    # made on (baseline.model.BOARD_*: "seen", "unseen", "unrecorded", "unknown"; "" for a
    # reported entry); how many boards made saves; and the spread between their levels
    # learned from them (a standard deviation of log efficiency, with its degrees of freedom;
    # 0 below two boards).
    board: str = ""
    board_status: str = ""
    boards: int = 0
    between_sd: float = 0.0
    between_df: int = 0
    # The baselines the entry replaced, oldest first (its trail; the entry itself not in it),
    # and the commit and time of the entry's latest save.
    trail: tuple[TrailPoint, ...] = ()
    commit: str = ""
    when: str = ""
    latest_board: str = ""


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

    @property
    def confirmed(self) -> bool:
        """A regression that a second round agreed with."""
        return self.confirmation is not None and self.state == AB_REGRESSED


# SaveAction.why_not of a save that was planned and not made (the rest were never planned)
SAVE_NOT_MADE = ("write", "interrupted", "invalid", "crashed", "missing")


@dataclass(frozen=True)
class SaveAction:
    """What --gpuperf-save does with a measurement: where it goes, or why it is not saved."""

    saved: bool
    path: str
    device_key: str
    # "floor": the floor check failed; "unjudged": the test failed; "beyond-peak": the
    # efficiency is beyond what the device can do; "write": planned, but the file could not be
    # written (`error` says why); "interrupted": Ctrl-C (or SIGTERM) came first; "invalid":
    # the entry would not load back; "crashed": the xdist worker holding it died;
    # "missing": not in the file when the controller read it back
    why_not: str = ""
    previous_efficiency: float | None = None
    history_saves: int = 0  # saves in the entry's history after this one
    new_history: bool = False  # the code changed (fingerprint, bytes, launch): history restarts
    run_spread: float | None = None
    spread_basis: str = ""
    error: str = ""  # why the planned save was not made (write, invalid, crashed, missing)
    when: str = ""  # the save record's time stamp: how the controller finds it in the file


@dataclass(frozen=True)
class Note:
    """A fact for the reader, as data (`kind` names it; renderers word it once per run)."""

    kind: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Acceptance:
    """An intended slowdown, accepted explicitly: the glob of test ids it names, why, and
    where it was written (`source`: "--gpuperf-accept", "gpuperf_accept (ini)" or
    "Gpuperf-Accept trailer"; `commit` the commit that carries the trailer)."""

    pattern: str
    reason: str
    source: str
    commit: str = ""

    def origin(self) -> str:
        """'Gpuperf-Accept in 1a2b3c4d5e6f' or '--gpuperf-accept'."""
        return f"Gpuperf-Accept in {self.commit[:12]}" if self.commit else self.source


@dataclass(frozen=True)
class BeyondPeak:
    """A measured efficiency the device cannot reach (gate/peak.py): the declared bytes
    moved in the measured time need more than the memory system can deliver, even at the
    slow end of the time's interval. The declaration is wrong (or the kernel skipped work);
    the test fails and nothing is saved."""

    efficiency_ci: tuple[float, float]
    limit: float  # the most efficiency reachable in this cache mode (1.0: the HBM peak)
    cache: str
    bytes_moved: int
    cache_bytes: int  # the device's caches (L2 + last-level) that a hot working set may hit
    bandwidth_bps: float
    peak_bps: float


@dataclass(frozen=True)
class Verdict:
    """What the gate decided for one measurement: the test-level status and every check.

    Renderers (report/) turn it into words; `update_command` is the command that re-records
    this measurement's baseline, quoted wherever a message asks for one.
    """

    status: str  # PASS | FAIL | MARGINAL | UNJUDGED | MODELLED | ACCEPTED
    baseline: BaselineCheck
    floor: FloorCheck | None = None
    comparison: ComparisonCheck | None = None
    save: SaveAction | None = None
    notes: tuple[Note, ...] = ()
    update_command: str = ""
    # the accept rule that names this test (status ACCEPTED when it excused a regression;
    # on any other status it was not needed: the test did not regress)
    acceptance: Acceptance | None = None
    beyond_peak: BeyondPeak | None = None  # set only when the efficiency is impossible
    # Why a failure happened, as plain data (docs/json-schema.md, "explain"): "code" (the
    # compiled code of head and base, explain/failure.py), "traffic" and "bytes_check".
    # None on every verdict that was not explained.
    explain: dict[str, Any] | None = None

    @property
    def unmeasured(self) -> tuple[str, ...]:
        """The gating checks whose result restates the simulator's model rather than a
        measurement of the code: "ab" (a modelled A/B), "stored" (a modelled stored check)."""
        found = []
        if self.comparison is not None and self.comparison.state == AB_MODELLED:
            found.append("ab")
        if self.baseline.modelled and self.baseline.gating and self.save is None:
            found.append("stored")
        return tuple(found)

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """Which checks failed the test: "beyond-peak", "floor", "regression", "ab",
        "strict-baseline", "strict-ab", "strict-modelled", "drift" (strict)."""
        return self.causes if self.status == FAIL else ()

    @property
    def accepted_checks(self) -> tuple[str, ...]:
        """The regressions an accepted slowdown excused ("regression", "ab")."""
        return self.causes if self.status == ACCEPTED else ()

    @property
    def causes(self) -> tuple[str, ...]:
        """Every check that says fail, whatever the status made of them."""
        causes = []
        if self.beyond_peak is not None:
            causes.append("beyond-peak")
        if self.floor is not None and self.floor.status == FAIL:
            causes.append("floor")
        if self.baseline.gating and self.baseline.outcome == REGRESSED:
            causes.append("regression")
        if (
            self.baseline.gating
            and self.baseline.strict
            and self.baseline.outcome
            in (
                NO_BASELINE,
                OTHER_DEVICE,
            )
        ):
            causes.append("strict-baseline")
        if self.baseline.gating and self.baseline.strict and self.baseline.drift is not None:
            causes.append("drift")
        comparison = self.comparison
        if comparison is not None:
            if comparison.state == AB_REGRESSED:
                causes.append("ab")
            elif comparison.strict and (
                comparison.state == AB_INCONCLUSIVE
                or (comparison.state == AB_NO_BASE and comparison.no_base_why == NO_BASE_REF)
            ):
                causes.append("strict-ab")
        strict = (self.comparison is not None and self.comparison.strict) or self.baseline.strict
        if self.unmeasured and strict:
            causes.append("strict-modelled")
        return tuple(causes)


@dataclass(frozen=True)
class Row:
    """One measurement of one test, what the gate decided, and how pytest ended the test
    (`test_outcome`: "passed", "failed", ...; "" while the test is still running)."""

    test_id: str
    measurement: Measurement
    verdict: Verdict
    test_outcome: str = ""
