"""The plugin's settings: built once from the command line and the ini file, then frozen.

`build_settings` turns the options (declared once in options.py, each value parsed by
parsing.py) into the session's frozen `Settings`; `settings_for_test` adds what a test's
`min_bw`, `min_flops`, `min_roofline` (floors.py) and `gpuperf` markers say, giving its
frozen `TestSettings`. Errors are `ConfigError`s naming the option, ini key or test;
plugin/__init__.py turns them into `pytest.UsageError`. No pytest import here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.config.floors import (
    MIN_BW,
    MIN_FLOPS,
    MIN_ROOFLINE,
    FloorRule,
    MarkerArgs,
    call_text,
    floor_rule,
    most_specific,
)
from pytest_gpuperf.config.options import (
    DEFAULT_BACKENDS,
    DEFAULT_BASELINE_DIR,
    DEFAULT_BUDGET_S,
    DEFAULT_CACHE,
    DEFAULT_COMPILE_TIMEOUT_S,
    DEFAULT_EXPLAIN_TIMEOUT_S,
    DEFAULT_GPU_MARGIN,
    GPUPERF_HELP,
    MIN_BW_HELP,
    MIN_FLOPS_HELP,
    MIN_ROOFLINE_HELP,
    OPTIONS,
)
from pytest_gpuperf.config.parsing import (
    parse_backends,
    parse_bool,
    parse_budget,
    parse_buffer_sets,
    parse_cache,
    parse_clang,
    parse_code_spread,
    parse_device_key,
    parse_gpu_index,
    parse_gpu_margin,
    parse_hard_limit,
    parse_history,
    parse_loads,
    parse_peak_gbps,
    parse_ref,
    parse_require,
    parse_shard,
    parse_sim_gpus,
    parse_static_archs,
    parse_suite_alarm,
    parse_threshold,
    parse_tolerance,
    seconds_parser,
)
from pytest_gpuperf.engine.policy import DEFAULT_PAIR_LOADS, HARD_LIMIT_MULTIPLE
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.accept import INI_SOURCE, OPTION_SOURCE, option_rules
from pytest_gpuperf.gate.policy import (
    DEFAULT_COMPARE_THRESHOLD,
    DEFAULT_TOLERANCE,
    HISTORY_LENGTH,
)
from pytest_gpuperf.gate.suite import DEFAULT_SUITE_ALARM

if TYPE_CHECKING:
    from pytest_gpuperf.record.verdict import Acceptance

# Options that act only while a run measures. Given on the command line to a run that does
# not, they would be ignored without a word, so the run stops instead (exit 4) and says what
# to add; their ini values are defaults for measuring runs and never stop a smoke run.
# --gpuperf-compare and --gpuperf-save name a measurement themselves: they imply --gpuperf.
MEASURING_ONLY = (
    "gpuperf_tolerance",
    "gpuperf_compare_threshold",
    "gpuperf_compare_code_spread",
    "gpuperf_compare_loads",
    "gpuperf_compare_buffer_sets",
    "gpuperf_compare_force",
    "gpuperf_code_facts",
    "gpuperf_suite_alarm",
    "gpuperf_history",
    "gpuperf_budget",
    "gpuperf_hard_limit",
    "gpuperf_accept",
    # the static gate acts on these too
    "gpuperf_strict",
    "gpuperf_compare_missing_ok",
    "gpuperf_prune",
    "gpuperf_explain",
    "gpuperf_check_bytes",
    "gpuperf_explain_timeout",
)
STATIC_ACTS_ON = ("gpuperf_strict", "gpuperf_compare_missing_ok", "gpuperf_prune")


@dataclass(frozen=True)
class Settings:
    """The session's settings; `measure` is true for --gpuperf, and for --gpuperf-save and
    --gpuperf-compare given on the command line (they imply it)."""

    measure: bool = False
    save: bool = False
    backends: tuple[str, ...] = DEFAULT_BACKENDS
    require: str | None = None  # "gpu" | "hip" | "cuda"
    device_key: str | None = None
    gpu_index: int | None = None
    gpu_margin: float = DEFAULT_GPU_MARGIN  # 0: no probe
    refuse_degraded: bool = False
    sim_gpu_speeds: tuple[float, ...] = (1.0,)
    baseline_dir: Path = Path(DEFAULT_BASELINE_DIR)
    tolerance: float = DEFAULT_TOLERANCE
    strict: bool = False
    compare_ref: str | None = None
    head_ref: str | None = None  # --gpuperf-head: kernels built from this revision's tree
    compare_threshold: float = DEFAULT_COMPARE_THRESHOLD
    compare_code_spread: float | None = None  # None: the backend's (policy.DEFAULT_CODE_SPREAD)
    compare_loads: int = DEFAULT_PAIR_LOADS
    compare_buffer_sets: int | None = None  # None: one per load (policy.pair_buffer_sets)
    compare_force: bool = False
    code_facts: bool = False  # --gpuperf-code-facts: every A/B row's, not only a failure's
    suite_alarm: float = DEFAULT_SUITE_ALARM
    compare_missing_ok: bool = False  # an unresolvable REF: no base, instead of a usage error
    shard: tuple[int, int] | None = None  # (K, N): --gpuperf-shard=K/N
    history_length: int = HISTORY_LENGTH
    prune: bool = False
    budget_s: float = DEFAULT_BUDGET_S
    hard_limit: float = HARD_LIMIT_MULTIPLE  # x budget_s: a measurement's hard limit
    kernel_timeout_s: float | None = None  # None: 60 s + 10 x budget_s
    compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S
    cache: str = DEFAULT_CACHE
    json_path: Path | None = None
    benchmark_json_path: Path | None = None
    markdown_path: Path | None = None
    explain: bool = False  # --gpuperf-explain: profile every measured test (explain/)
    check_bytes: bool = False  # --gpuperf-check-bytes
    explain_timeout_s: float = DEFAULT_EXPLAIN_TIMEOUT_S
    accept: tuple[Acceptance, ...] = ()  # --gpuperf-accept / gpuperf_accept (gate/accept.py)
    static_archs: tuple[str, ...] = ()  # gpuperf-static: --gpuperf-static (empty: off)
    clang: str | None = None  # gpuperf-static: --gpuperf-clang
    # option dests set by the ini file: a command printed for the user leaves them out (the
    # ini file still sets them when the user runs it)
    from_ini: frozenset[str] = frozenset()

    @property
    def static(self) -> bool:
        """The static gate is on (gpuperf-static): simulated data flow, nothing timed."""
        return bool(self.static_archs)

    @property
    def watchdog_s(self) -> float:
        """The kernel timeout in force (--gpuperf-kernel-timeout, else from the budget)."""
        if self.kernel_timeout_s is not None:
            return self.kernel_timeout_s
        return 60.0 + 10.0 * self.budget_s

    @property
    def allowed_backends(self) -> tuple[str, ...]:
        """The backends to try: --gpuperf-require drops the simulated device, and hip/cuda
        keep only that backend. The static gate runs the data flow on the simulated device."""
        if self.static_archs:  # gpuperf-static
            return ("sim",)
        if self.require is None:
            return self.backends
        if self.require == "gpu":
            return tuple(b for b in self.backends if b != "sim") or ("hip", "cuda")
        return (self.require,)

    def command_options(self) -> list[str]:
        """The options a re-run needs to measure the same way (for the update command)."""
        wanted = (
            ("gpuperf_backend", self.backends != DEFAULT_BACKENDS, ",".join(self.backends)),
            ("gpuperf_require", bool(self.require), self.require),
            ("gpuperf_device", bool(self.device_key), self.device_key),
            ("gpuperf_cache", self.cache != DEFAULT_CACHE, self.cache),
        )
        return [
            f"--{dest.replace('_', '-')}={value}"
            for dest, differs, value in wanted
            if differs and dest not in self.from_ini
        ]


@dataclass(frozen=True)
class TestSettings:
    """What one test is measured and gated with: the session's settings plus its markers."""

    __test__ = False  # not a test class, whatever pytest's collector thinks of the name

    test_id: str
    floors: tuple[FloorRule, ...] = ()  # min_bw, closest marker first
    tolerance: float = DEFAULT_TOLERANCE
    cache: str = DEFAULT_CACHE
    budget_s: float = DEFAULT_BUDGET_S
    peak_bps: float | None = None
    strict: bool = False
    flops_floors: tuple[FloorRule, ...] = ()  # min_flops, closest marker first
    roofline_floors: tuple[FloorRule, ...] = ()  # min_roofline, closest marker first

    def floor_for(self, name: str, device: str, cache: str, mark: str = MIN_BW) -> FloorRule | None:
        """The `mark` floor (min_bw, min_flops, min_roofline) of one measurement: the most
        specific matching rule, and among equally specific ones the closest marker."""
        rules = {MIN_BW: self.floors, MIN_FLOPS: self.flops_floors}.get(mark, self.roofline_floors)
        return most_specific(rules, name, device, cache)


# -- the session's settings, from the command line and the ini file ---------------------


def build_settings(
    cli: Mapping[str, Any],
    ini: Mapping[str, Any],
    *,
    rootdir: Path,
    invocation_dir: Path,
) -> Settings:
    """The session's Settings: a command-line value wins over the ini value, which wins over
    the default. `cli` maps option dests to values (None: not given); `ini` maps ini keys to
    values (None or "": not set). Relative paths are taken from the invocation directory on
    the command line and from the rootdir in the ini file, as pytest does."""
    values: dict[str, Any] = {}
    for spec in OPTIONS:
        given = cli.get(spec.dest)
        if given is not None:
            values[spec.dest] = (given, spec.flag, invocation_dir)
            continue
        from_ini = ini.get(spec.ini) if spec.ini else None
        if from_ini is not None and from_ini != "" and from_ini != []:
            values[spec.dest] = (from_ini, f"{spec.ini} (ini)", rootdir)

    def on_command_line(dest: str) -> bool:
        return dest in values and values[dest][1].startswith("--")

    def get(dest: str, parse: Callable[[Any, str], Any], default: Any) -> Any:
        if dest not in values:
            return default
        raw, where, _ = values[dest]
        return parse(raw, where)

    def path(dest: str, *, report: bool = False) -> Path | None:
        if dest not in values:
            return None
        raw, where, base = values[dest]
        text = str(raw).strip()
        if not text:
            raise ConfigError(f"{where}: expected a path, got an empty value")
        if report and text == "-":
            raise ConfigError(
                f"{where}=-: standard output carries pytest's own output, a report there "
                "could not be read back; give a file path"
            )
        joined = Path(os.path.abspath(base / Path(os.path.expanduser(text))))
        # A report path keeps its links (record/files.py judges what one points to, and
        # /dev/stdout must still read as /dev/stdout); a folder is resolved once here,
        # unless a link on its way points nowhere: resolved, the save created the link's
        # target (wherever it pointed) and saved there
        if report:
            return joined
        for step in (joined, *joined.parents):
            if os.path.islink(step) and not os.path.exists(step):
                raise ConfigError(
                    f"{where}={text}: {step} is a symbolic link to {os.readlink(step)!r}, "
                    "which does not exist; a save would create its target. Remove the link, "
                    "or give a directory that exists (or a new name in one)"
                )
        return joined.resolve()

    save = get("gpuperf_save", parse_bool, False)
    compares = on_command_line("gpuperf_compare")
    measure = bool(get("gpuperf", parse_bool, False) or save or compares)
    if get("no_gpuperf", parse_bool, False):
        if save or compares:
            implied = "--gpuperf-save" if save else "--gpuperf-compare"
            raise ConfigError(f"--no-gpuperf and {implied} contradict each other")
        measure = False
    baseline_dir = path("gpuperf_baseline_dir") or (rootdir / DEFAULT_BASELINE_DIR)
    # -- gpuperf-static: the static gate times nothing, so it turns measuring off
    static_archs = get("gpuperf_static", parse_static_archs, ())
    require = get("gpuperf_require", parse_require, None)
    if static_archs:
        given = values.get("gpuperf")
        if given is not None and given[1] == "--gpuperf" and parse_bool(given[0], "--gpuperf"):
            raise ConfigError(
                "--gpuperf and --gpuperf-static exclude each other: the static gate times "
                "nothing (it runs the data flow on the simulated device); measure in another run"
            )
        measure = False
    elif require == "static":
        raise ConfigError(
            "--gpuperf-require=static requires the static gate: add --gpuperf-static=ARCH"
        )
    # -- end gpuperf-static
    if not measure:
        idle = [
            values[dest][1]
            for dest in MEASURING_ONLY
            if on_command_line(dest) and not (static_archs and dest in STATIC_ACTS_ON)
        ]
        if idle:
            why = "the static gate times nothing" if static_archs else "this run does not measure"
            raise ConfigError(
                f"{', '.join(idle)} only act{'s' if len(idle) == 1 else ''} while measuring, "
                f"and {why}: add --gpuperf (or --gpuperf-save / --gpuperf-compare=REF, which "
                "imply it), or leave the option out"
            )
    accept: tuple[Acceptance, ...] = ()
    if "gpuperf_accept" in values:
        raw, where, _ = values["gpuperf_accept"]
        source = OPTION_SOURCE if where.startswith("--") else INI_SOURCE
        accept = option_rules(raw if isinstance(raw, list | tuple) else [raw], source)
    if save and "gpuperf_head" in values:
        raise ConfigError(
            "--gpuperf-head and --gpuperf-save exclude each other: a baseline records the work "
            "tree's commit, not the revision its kernels were built from; check that revision "
            "out to save its baselines"
        )
    return Settings(
        measure=measure,
        save=save,
        backends=get("gpuperf_backend", parse_backends, DEFAULT_BACKENDS),
        require=require,
        device_key=get("gpuperf_device", parse_device_key, None),
        gpu_index=get("gpuperf_gpu", parse_gpu_index, None),
        gpu_margin=get("gpuperf_gpu_margin", parse_gpu_margin, DEFAULT_GPU_MARGIN),
        refuse_degraded=get("gpuperf_refuse_degraded", parse_bool, False),
        sim_gpu_speeds=get("gpuperf_sim_gpus", parse_sim_gpus, (1.0,)),
        baseline_dir=baseline_dir,
        tolerance=get("gpuperf_tolerance", parse_tolerance, DEFAULT_TOLERANCE),
        strict=get("gpuperf_strict", parse_bool, False),
        compare_ref=get("gpuperf_compare", parse_ref, None),
        head_ref=get("gpuperf_head", parse_ref, None),
        compare_threshold=get(
            "gpuperf_compare_threshold", parse_threshold, DEFAULT_COMPARE_THRESHOLD
        ),
        compare_code_spread=get("gpuperf_compare_code_spread", parse_code_spread, None),
        compare_loads=get("gpuperf_compare_loads", parse_loads, DEFAULT_PAIR_LOADS),
        compare_buffer_sets=get("gpuperf_compare_buffer_sets", parse_buffer_sets, None),
        compare_force=get("gpuperf_compare_force", parse_bool, False),
        code_facts=get("gpuperf_code_facts", parse_bool, False),
        suite_alarm=get("gpuperf_suite_alarm", parse_suite_alarm, DEFAULT_SUITE_ALARM),
        compare_missing_ok=get("gpuperf_compare_missing_ok", parse_bool, False),
        shard=get("gpuperf_shard", parse_shard, None),
        history_length=get("gpuperf_history", parse_history, HISTORY_LENGTH),
        prune=get("gpuperf_prune", parse_bool, False),
        budget_s=get("gpuperf_budget", parse_budget, DEFAULT_BUDGET_S),
        hard_limit=get("gpuperf_hard_limit", parse_hard_limit, HARD_LIMIT_MULTIPLE),
        kernel_timeout_s=get("gpuperf_kernel_timeout", seconds_parser("the kernel timeout"), None),
        compile_timeout_s=get(
            "gpuperf_compile_timeout",
            seconds_parser("the compile timeout"),
            DEFAULT_COMPILE_TIMEOUT_S,
        ),
        cache=get("gpuperf_cache", parse_cache, DEFAULT_CACHE),
        json_path=path("gpuperf_json", report=True),
        benchmark_json_path=path("gpuperf_benchmark_json", report=True),
        markdown_path=path("gpuperf_markdown", report=True),
        explain=get("gpuperf_explain", parse_bool, False),
        check_bytes=get("gpuperf_check_bytes", parse_bool, False),
        explain_timeout_s=get(
            "gpuperf_explain_timeout",
            seconds_parser("the explain timeout"),
            DEFAULT_EXPLAIN_TIMEOUT_S,
        ),
        accept=accept,
        static_archs=static_archs,  # gpuperf-static
        clang=get("gpuperf_clang", parse_clang, None),  # gpuperf-static
        from_ini=frozenset(
            dest for dest, (_, where, _) in values.items() if where.endswith("(ini)")
        ),
    )


# -- a test's settings, from its markers ---------------------------------------------------

MARKER_KEYWORDS = ("tolerance", "cache", "budget_s", "peak_gbps", "strict")


def settings_for_test(
    settings: Settings,
    test_id: str,
    *,
    min_bw: Sequence[MarkerArgs] = (),
    gpuperf: Sequence[MarkerArgs] = (),
    min_flops: Sequence[MarkerArgs] = (),
    min_roofline: Sequence[MarkerArgs] = (),
) -> TestSettings:
    """The settings for one test; `ConfigError` naming the test for a bad marker.

    `min_bw`, `gpuperf`, `min_flops` and `min_roofline` list the test's marks closest first
    (as pytest's iter_markers); the floors' arguments are config/floors.py's.
    """
    result = TestSettings(
        test_id=test_id,
        tolerance=settings.tolerance,
        cache=settings.cache,
        budget_s=settings.budget_s,
        strict=settings.strict,
    )
    result = replace(
        result,
        floors=tuple(floor_rule(test_id, marker, MIN_BW) for marker in min_bw),
        flops_floors=tuple(floor_rule(test_id, marker, MIN_FLOPS) for marker in min_flops),
        roofline_floors=tuple(floor_rule(test_id, marker, MIN_ROOFLINE) for marker in min_roofline),
    )
    merged: dict[str, Any] = {}
    for marker in reversed(tuple(gpuperf)):  # farthest first: the closest overwrites
        merged.update(_gpuperf_keywords(test_id, marker))
    return _apply_gpuperf(result, test_id, merged) if merged else result


def _gpuperf_keywords(test_id: str, marker: MarkerArgs) -> dict[str, Any]:
    where = f"{test_id}: @pytest.mark.gpuperf"
    if marker.args:
        raise ConfigError(
            f"{where} takes keyword arguments only ({', '.join(MARKER_KEYWORDS)}); got "
            f"{call_text(marker)}"
        )
    kwargs = dict(marker.kwargs or {})
    unknown = sorted(set(kwargs) - set(MARKER_KEYWORDS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown keyword {', '.join(map(repr, unknown))}; valid keywords: "
            f"{', '.join(MARKER_KEYWORDS)}"
        )
    return kwargs


def _apply_gpuperf(result: TestSettings, test_id: str, kwargs: Mapping[str, Any]) -> TestSettings:
    where = f"{test_id}: @pytest.mark.gpuperf"
    changes: dict[str, Any] = {}
    if "tolerance" in kwargs:
        changes["tolerance"] = parse_tolerance(kwargs["tolerance"], f"{where}(tolerance=...)")
    if "cache" in kwargs:
        changes["cache"] = parse_cache(kwargs["cache"], f"{where}(cache=...)")
    if "budget_s" in kwargs:
        changes["budget_s"] = parse_budget(kwargs["budget_s"], f"{where}(budget_s=...)")
    if "peak_gbps" in kwargs:
        gbps = parse_peak_gbps(kwargs["peak_gbps"], f"{where}(peak_gbps=...)")
        changes["peak_bps"] = gbps * 1e9
    if "strict" in kwargs:
        if not isinstance(kwargs["strict"], bool):
            raise ConfigError(f"{where}(strict=...): must be True or False")
        changes["strict"] = kwargs["strict"]
    return replace(result, **changes)


# -- pytest-xdist ----------------------------------------------------------------------------


def xdist_worker_number(env: Mapping[str, str] = os.environ) -> int | None:
    """k for pytest-xdist worker "gwk", None outside xdist."""
    match = re.fullmatch(r"gw(\d+)", env.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) if match else None


def gpu_index_for(
    settings: Settings, device_count: int, worker: int | None, refused: Sequence[int] = ()
) -> int:
    """The device index to open: the explicit one, else worker k's GPU: the k mod n-th of the
    n GPUs not refused (all of them unless the degraded-GPU probe refused some)."""
    if settings.gpu_index is not None:
        return settings.gpu_index
    usable = [index for index in range(device_count) if index not in refused] or [0]
    if worker is None:
        return usable[0]
    return usable[worker % len(usable)]


def describe(settings: Settings, rootdir: Path | None = None, width: int = 110) -> list[str]:
    """The header's lines with the settings that decide a verdict, as few as fit `width`
    characters each (the baseline folder relative to `rootdir` when it lies inside)."""
    mode = "save baselines" if settings.save else "measure and gate"
    parts = [
        mode,
        f"backends {','.join(settings.allowed_backends)}",
        f"cache {settings.cache}",
        f"tolerance {settings.tolerance:.1%}",
        f"budget {settings.budget_s:g} s",
    ]
    if settings.compare_ref:
        forced = ", forced" if settings.compare_force else ""
        code = settings.compare_code_spread
        spread = f", code spread ±{code:.2%}" if code is not None else ""
        loads = settings.compare_loads
        loaded = f", {loads} loads per side" if loads != DEFAULT_PAIR_LOADS else ""
        if settings.compare_buffer_sets is not None:
            sets = min(settings.compare_buffer_sets, loads)
            loaded += f", {sets} buffer set{'s' if sets != 1 else ''}"
        parts.append(
            f"A/B against {settings.compare_ref} (threshold {settings.compare_threshold:.1%}"
            f"{spread}{loaded}{forced})"
        )
    if settings.head_ref:
        parts.append(f"kernels from {settings.head_ref}")
    if settings.suite_alarm != DEFAULT_SUITE_ALARM:
        parts.append(f"suite false alarms {settings.suite_alarm:.1%}")
    if settings.shard:
        parts.append(f"shard {settings.shard[0]}/{settings.shard[1]}")
    if settings.require:
        parts.append(f"requires {settings.require}")
    if settings.device_key:
        parts.append(f"device {settings.device_key}")
    if settings.gpu_index is not None:
        parts.append(f"gpu {settings.gpu_index}")
    if settings.strict:
        parts.append("strict")
    folder = settings.baseline_dir
    if rootdir is not None and folder.is_relative_to(rootdir):
        folder = folder.relative_to(rootdir)
    parts.append(f"baselines {folder}")
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 2 + len(part) > width:
            lines[-1] += ","
            lines.append(part)
        else:
            lines[-1] += f", {part}"
    return lines


# OPTIONS and the markers' help texts are re-exported for plugin/__init__.py, which registers them.
__all__ = [
    "GPUPERF_HELP",
    "MIN_BW_HELP",
    "MIN_FLOPS_HELP",
    "MIN_ROOFLINE_HELP",
    "OPTIONS",
    "FloorRule",
    "MarkerArgs",
    "Settings",
    "TestSettings",
    "build_settings",
    "settings_for_test",
]
