"""A callable's A/B under --gpuperf-compare=REF: its base found, both sides captured several
times, the captures timed in interleaved pairs, and the confirmation round on fresh captures.

Why several captures a side: `gpu_bench.run(fn)` cannot show the engine its buffers, so each
side runs on the buffers its own test body allocated (head's body made head's, base's body,
run again at REF, made base's). Where those buffers landed in device memory moves a
streaming kernel's time by ~1.5% at 64 MB buffers on an H200, the same code or not, and one
capture a side reads that placement as a code change (an unchanged Triton copy kernel read
-1.4%, "improved", in 2 of 2 runs). So each side is captured `CALLABLE_CAPTURES` times: head's
first capture is the callable the running test passed, the others are head's test body run
again with a capturing `gpu_bench` (session/callable_base.py's capture_head), base's are its
body at REF run as many times (load_base once, then recapture_base on the modules it loaded,
as head's run on head's live ones: a Triton kernel is not compiled or autotuned again per
capture), every capture making fresh tensors. The confirmation round loads base afresh once
and captures both sides anew. Capture i of
head is paired with capture i of base as load i of a kernel's pair is (the slots go round
the loads, head and base interleaved in a random order per slot), and the nested statistic
measures the spread between captures and carries it in the interval (drift_basis
"measured"), as a kernel's loads x buffer sets do (docs/measurement.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_gpuperf.engine.deadline import Deadline
from pytest_gpuperf.engine.measure import MeasureSettings, measure_callable
from pytest_gpuperf.engine.results import Measurement, PairedComparison
from pytest_gpuperf.gate.judge import AbResult, Recheck, Taken
from pytest_gpuperf.gate.pairing import measure_callable_ab
from pytest_gpuperf.gate.suite import interval_confidence
from pytest_gpuperf.record.checks import NO_BASE_CALLABLE
from pytest_gpuperf.session.base_fixtures import one_line
from pytest_gpuperf.session.callable_base import (
    BaseCallable,
    NoBaseKernel,
    TestBody,
    capture_head,
    load_base,
    recapture_base,
)
from pytest_gpuperf.session.gpu_lock import GpuLock
from pytest_gpuperf.session.profile_child import BASE, HEAD

# Captures a side (loads of the pair). The nested statistic needs >= 3 loads to measure
# drift (engine/stats.py's MIN_LOADS_TO_ESTIMATE); with k loads its interval takes k - 1
# degrees of freedom, so 3 would widen it by t(2) = 4.30 against 8 loads' t(7) = 2.36. Six
# (t(5) = 2.57) keeps t within 9% of a kernel pair's while each capture is a body run and
# its own buffers: 5 more body runs a side than one capture, no more samples.
CALLABLE_CAPTURES = 6


@dataclass(frozen=True)
class PairInputs:
    """What a callable's A/B reads of its test beside gpu_bench's public face, handed over
    by `GpuBench.pair_inputs` (never read from its private fields)."""

    body: TestBody | None  # the test function and its fixture values: base's runs it at REF
    kernel_files: tuple[Path, ...]  # the work tree's kernel files it loaded, in first use
    lock: GpuLock  # the lock of the GPU it measures on, held for every launch there


@dataclass(frozen=True)
class Captures:
    """The callables of a pair, one per load a side, and the base that made base's first
    (its fingerprints, changed files and modules describe the pair); `short` says why there
    are fewer than wanted ("" when not)."""

    heads: tuple[Callable[[], Any], ...]
    head_setups: tuple[Callable[[], Any] | None, ...]
    bases: tuple[Callable[[], Any], ...]
    base_setups: tuple[Callable[[], Any] | None, ...]
    base: BaseCallable
    short: str = ""


def find_base(
    bench: Any,
    label: str,
    head: tuple[Callable[[], Any], Callable[[], Any] | None] | None = None,
) -> BaseCallable:
    """The base revision's version of `bench`'s test's callable `label`, its body run at REF
    with a capturing gpu_bench on modules loaded afresh (callable_base.py's load_base).
    `head` (the test's callable and setup) is called once first, synchronized, while what the
    test executes is recorded (session/executed.py): the callable's own code (a launcher in
    the repository, a lazy import) is then among the files compared. Its later calls (the
    captures' first calls, the engine's) are not recorded: the GPU lock pauses the recording."""
    inputs: PairInputs = bench.pair_inputs
    if inputs.body is None:
        return BaseCallable(why=NO_BASE_CALLABLE, detail="the test function is not known")
    if head is not None:
        fn, setup = head
        if setup is not None:
            setup()
        fn()
        bench.backend.synchronize()
    session = bench.bench_session
    return load_base(
        inputs.body,
        session.base_tree(),
        label,
        bench,
        inputs.kernel_files,
        _base_kernel_of(bench),
        force=session.settings.compare_force,
    )


def profiled_sides(
    bench: Any, label: str, head: tuple[Callable[[], Any], Callable[[], Any] | None]
) -> list[tuple[str, Callable[[], Any], Callable[[], Any] | None]]:
    """The (side, callable, setup) an explain pass's child profiles: head's, and base's (its
    test's Python at the run's --gpuperf-compare REF, for a stored failure the baseline's
    saved commit, found as the A/B finds it) unless there is no compare, the code is the same
    or REF has none."""
    sides = [(HEAD, *head)]
    if bench.bench_session.settings.compare_ref:
        found = find_base(bench, label, head)
        if found.fn is not None and not found.same_code:
            sides.append((BASE, found.fn, found.setup))
    return sides


def _base_kernel_of(bench: Any) -> Callable[[Any], Any]:
    """What a base body's gpu_bench.kernel gives: the base build of a changed kernel file,
    head's kernel for a file that is the same at REF."""
    session = bench.bench_session

    def base_kernel(head: Any) -> Any:
        path = head.module.origin_path or head.module.source_path
        source, _, detail = session.base_tree().source_for(path) if path else (None, "", "")
        if (
            source is not None
            and path is not None
            and source.read_bytes() == Path(path).read_bytes()
        ):
            return head  # the same file: the same module, as a kernel's A/B would find
        base, _, why = session.base_kernel(head)
        if base is None:
            raise NoBaseKernel(why or detail)
        return base

    return base_kernel


def capture(
    bench: Any,
    label: str,
    first: BaseCallable,
    head: tuple[Callable[[], Any], Callable[[], Any] | None] | None,
    deadline: Deadline,
    count: int = CALLABLE_CAPTURES,
) -> Captures:
    """`count` captures a side: base's `first` and count - 1 more from its body at REF run
    again on the modules `first` loaded (a Triton kernel not compiled anew per capture); head's
    `head` (the running test's callable and setup; None: a fresh capture for every load, as
    the confirmation round takes) and fresh ones from head's body run again. A capture that
    fails shortens both sides to the pairs that have both (fewer than 3: drift assumed), and
    so does the round's `deadline`: no capture starts in the last half of its limit (the pairs
    need it), and none after one capture took more than what is left."""
    assert first.fn is not None
    bases = [(first.fn, first.setup)]
    heads = [head] if head is not None else []
    short = ""
    body = bench.pair_inputs.body
    began_s = deadline.left_s()
    per_capture_s = 0.0

    def no_time() -> str:
        left_s = deadline.left_s()
        if left_s > max(began_s / 2, 2 * per_capture_s):
            return ""
        return f"the round's hard limit ({deadline.limit_s:g} s) left no time for more"

    while len(bases) < count and body is not None:
        if short := no_time():
            break
        before_s = deadline.left_s()
        again = recapture_base(first, body, label, bench, _base_kernel_of(bench))
        per_capture_s = max(per_capture_s, before_s - deadline.left_s())
        if isinstance(again, str):
            short = again
            break
        bases.append(again)
    while len(heads) < len(bases):
        if body is None:
            short = "head's test function is not known"
            break
        if short := no_time():
            break
        made = capture_head(body, label, bench)
        if isinstance(made, str):
            short = made
            break
        heads.append(made)
    loads = min(len(heads), len(bases))
    if loads == 0:  # no head capture in a confirmation round: the test's callable as it was
        return Captures((), (), (), (), first, short)
    return Captures(
        tuple(fn for fn, _ in heads[:loads]),
        tuple(setup for _, setup in heads[:loads]),
        tuple(fn for fn, _ in bases[:loads]),
        tuple(setup for _, setup in bases[:loads]),
        first,
        short,
    )


def warm(bench: Any, label: str, captures: Captures, deadline: Deadline) -> str:
    """Call every capture once (its setup first), before the GPU lock is taken: a Triton
    kernel compiles (or loads from Triton's cache) and autotunes on its first call, and base's
    modules are new objects whose kernels do so again. Inside the lock that work held the GPU
    for 2.4 s of a 2.9 s A/B of a 130 us Triton copy (H200, 2026-11-28), 40 times a kernel
    A/B's lock; the bodies that made the captures already ran outside it.

    Returns "" or, where base's code raised, why there is no base: base's callable was called
    once already (callable_base.py), so this is its second call, where a library takes its
    cached path (FlagGems 4.2.0's libentry, under a Triton newer than it knew, launched its
    cached kernel with too few arguments: H200, 2026-11-29). That is base's failure, not
    head's: head is measured alone and its stored baseline gates it, as for any base that
    fails. Head's own error ends its test as it would without the A/B."""
    sides = (
        (captures.heads, captures.head_setups, False),
        (captures.bases, captures.base_setups, True),
    )
    for fns, setups, base in sides:
        for fn, setup in zip(fns, setups, strict=True):
            try:
                if setup is not None:
                    setup()
                fn()
            except KeyboardInterrupt:
                raise
            except BaseException as failure:  # the user's code at REF (a pytest outcome too)
                if not base:
                    raise
                bench.backend.synchronize()
                return f"its callable failed when called again: {one_line(failure)}"
            deadline.check(
                label,
                lambda elapsed_s: (
                    f"the A/B's captures and their first calls took {elapsed_s:.1f} s, past "
                    f"their hard limit ({deadline.limit_s:g} s): each call is too slow for "
                    "this budget (raise --gpuperf-budget or --gpuperf-hard-limit)"
                ),
            )
    bench.backend.synchronize()
    return ""


def prepare(
    bench: Any,
    label: str,
    found: BaseCallable,
    head: tuple[Callable[[], Any], Callable[[], Any] | None],
) -> tuple[Captures | None, AbResult | None]:
    """A first round's captures (`capture`), each called once (`warm`), under a limit of
    their own (both sides compile and autotune here); (None, no base saying why) where
    base's code raised: head is then measured alone."""
    deadline = bench.deadline(pairs=True, first_calls=True)
    captures = capture(bench, label, found, head, deadline)
    failed = warm(bench, label, captures, deadline)
    if not failed:
        return captures, None
    detail = f"at {bench.bench_session.base_tree().ref}: {failed}"
    return None, found.ab(no_base_why=NO_BASE_CALLABLE, detail=detail)


def pair(
    bench: Any,
    captures: Captures,
    settings: MeasureSettings,
    confidence: float,
    seed: int,
    common: Mapping[str, Any],
) -> PairedComparison:
    """An A/B pair of head's captures and base's, load i = capture i a side, sampled as a
    kernel's pair is."""
    call = {key: value for key, value in common.items() if key != "setup"}
    return measure_callable_ab(
        bench.backend,
        captures.heads,
        captures.bases,
        policy=bench.bench_session.pair_policy,
        settings=settings,
        confidence=confidence,
        seed=seed,
        device=bench.device,
        setup=list(captures.head_setups),
        base_setup=list(captures.base_setups),
        head_fingerprint=captures.base.head_fingerprint,
        base_fingerprint=captures.base.base_fingerprint,
        **call,
    )


def measure(
    bench: Any,
    fn: Callable[[], Any],
    found: BaseCallable | None,
    captures: Captures | None,
    ab: AbResult | None,
    settings: MeasureSettings,
    common: Mapping[str, Any],
) -> tuple[Measurement, AbResult | None, PairedComparison | None]:
    """Measure callable `fn`: as an A/B pair of `captures` where there are some (`found` the
    base that made them), alone otherwise (`ab`: the result of an A/B not timed, or None).
    Returns (head's measurement, the A/B result, the pair or None)."""
    if captures is not None and captures.heads and found is not None:
        first = interval_confidence(bench.bench_session.suite.ab_round_rate)
        paired = pair(bench, captures, settings, first, len(bench.taken), common)
        return paired.head, found.ab(paired=paired), paired
    measurement = measure_callable(
        bench.backend, fn, device=bench.device, settings=settings, **common
    )
    return measurement, ab, None


def captures_again(bench: Any, recipe: Any, recheck: Recheck) -> Captures | None:
    """The confirmation round's fresh captures of both sides, made and warmed before the GPU
    lock is taken (base's body at REF and head's body run again, each on new buffers, so an
    unlucky placement of the first round's does not decide twice); None when the round times
    the callable alone. Where base can no longer be captured, the first round's base is taken
    again; where head cannot, the test's own callable."""
    if not (recheck.paired and recipe.base_fn is not None):
        return None
    first = recipe.base_fn
    deadline = bench.deadline(pairs=True, first_calls=True)
    found = find_base(bench, recipe.label)
    base = found if found.fn is not None else first
    captures = capture(bench, recipe.label, base, None, deadline)
    if not captures.heads:
        head = (recipe.fn, recipe.common.get("setup"))
        captures = capture(bench, recipe.label, base, head, deadline)
    if warm(bench, recipe.label, captures, deadline):  # base fails now: timed alone
        return None
    return captures


def again(
    bench: Any,
    recipe: Any,
    taken: Taken,
    recheck: Recheck,
    settings: MeasureSettings,
    captures: Captures | None,
) -> tuple[Taken | None, str]:
    """The confirmation round of callable measurement `recipe` (session/kernel_pairs.py's
    Recipe), under the GPU lock: a pair on `captures` (captures_again's), or the callable
    timed again as it is."""
    assert recipe.fn is not None
    if captures is not None:
        seed = 1_000_003 + recheck.position  # another slot order than the first round's
        paired = pair(bench, captures, settings, recheck.confidence, seed, recipe.common)
        return replace(taken, measurement=paired.head, ab=captures.base.ab(paired=paired)), ""
    measurement = measure_callable(
        bench.backend, recipe.fn, device=bench.device, settings=settings, **recipe.common
    )
    return replace(taken, measurement=measurement, ab=None), ""


def launches(bench: Any, recipes: Sequence[Any], name: str) -> str:
    """Which kernels one call of head's and of base's callable `name` launches, and the
    change ("" when `name` is not a callable pair, or nothing was seen)."""
    for recipe in recipes:
        base = recipe.base_fn
        if recipe.label != name or recipe.fn is None or base is None or base.fn is None:
            continue
        with bench.pair_inputs.lock.held(f"{bench.test.test_id} [{name}] (launches)"):
            head_names = launched_names(bench.backend, recipe.fn, recipe.common.get("setup"))
            base_names = launched_names(bench.backend, base.fn, base.setup)
        return launch_change(head_names, base_names)
    return ""


def launched_names(
    backend: Any, fn: Callable[[], Any], setup: Callable[[], Any] | None = None
) -> tuple[str, ...]:
    """The kernels one call of `fn` launches through `backend` (its setup's left out), in
    order: what a callable's failure lists head against base. Launches that do not pass
    through the plugin's backend (Triton's, PyTorch's, CuPy's own on a real GPU) are not
    seen here; the result is then empty."""
    if setup is not None:
        setup()
    names: list[str] = []
    original = backend.launch

    def recording(kernel: Any, *args: Any, **options: Any) -> None:
        names.append(str(getattr(kernel, "name", kernel)))
        original(kernel, *args, **options)

    backend.launch = recording  # this instance only, for this one call
    try:
        fn()
        backend.synchronize()
    finally:
        del backend.launch
    return tuple(names)


def launch_change(head: Sequence[str], base: Sequence[str]) -> str:
    """'launches per call: vector_add 1 -> 2' (each kernel whose count changed), or
    'the same launches per call (vector_add x1)'; "" when neither side was seen to launch."""
    if not head and not base:
        return ""
    kernels = list(dict.fromkeys([*base, *head]))
    moved = [
        f"{name} {list(base).count(name)} -> {list(head).count(name)}"
        for name in kernels
        if list(base).count(name) != list(head).count(name)
    ]
    if moved:
        return "launches per call: " + ", ".join(moved)
    same = ", ".join(f"{name} x{list(head).count(name)}" for name in kernels)
    return f"the same launches per call ({same})"


__all__ = [
    "CALLABLE_CAPTURES",
    "Captures",
    "PairInputs",
    "again",
    "capture",
    "captures_again",
    "find_base",
    "launch_change",
    "launched_names",
    "launches",
    "measure",
    "prepare",
    "warm",
]
