"""The plugin's settings: built once from the command line and the ini file, then frozen.

Every option is declared once here (`OPTIONS`), with its help text, default and ini key, so
that registering it (plugin.py), parsing it and its error messages cannot drift apart. The
per-test settings (`TestSettings`) add what the `min_bw` and `gpuperf` markers say. Errors
are `ConfigError`s naming the option, ini key or test; plugin.py turns them into
`pytest.UsageError`. No pytest import here.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.policy import (
    DEFAULT_CODE_SPREAD,
    DEFAULT_COMPARE_LOADS,
    DEFAULT_COMPARE_THRESHOLD,
    DEFAULT_TOLERANCE,
    HISTORY_LENGTH,
)
from pytest_gpuperf.gate.suite import DEFAULT_SUITE_ALARM
from pytest_gpuperf.results import CACHE_MODES

BACKEND_NAMES = ("hip", "cuda", "sim")
DEFAULT_BACKENDS = ("hip", "cuda")
DEFAULT_SIM_DEVICE = "mi300x"
REQUIRE_CHOICES = ("gpu", "hip", "cuda", "static")
DEFAULT_BUDGET_S = 1.0
DEFAULT_COMPILE_TIMEOUT_S = 300.0
DEFAULT_CACHE = "cold"
DEFAULT_BASELINE_DIR = "baselines"
# A GPU this far (a fraction) below the median of its peers' probe bandwidth is degraded:
# healthy H200s of one machine measured within 0.995-1.007 of each other, and the probe's own
# interval is a few tenths of a percent (docs/benchmarks.md, "GPU probe").
DEFAULT_GPU_MARGIN = 0.03
MAX_SIM_GPUS = 64

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class OptionSpec:
    """One command-line option and its ini equivalent (None: deliberately command-line only)."""

    flag: str  # "--gpuperf-tolerance"
    dest: str  # "gpuperf_tolerance"
    help: str
    ini: str | None
    is_flag: bool = False
    metavar: str | None = None


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "--gpuperf",
        "gpuperf",
        "measure every gpu_bench call and gate it on its min_bw floor and its baseline. "
        "Default: off (each kernel is launched once as a correctness smoke test).",
        ini="gpuperf",
        is_flag=True,
    ),
    OptionSpec(
        "--no-gpuperf",
        "no_gpuperf",
        "undo a gpuperf = true in the ini file for this run: smoke mode (each gpu_bench call "
        "launches once, nothing is timed or gated).",
        ini=None,
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-save",
        "gpuperf_save",
        "record the measurements as baselines in <baseline-dir>/<device>.toml "
        "(<device>-sim.toml on the simulated device), appended to each entry's history of "
        "saves, after their floor check passed; implies --gpuperf. "
        "Default: off. Command line only: saving baselines must be a deliberate act.",
        ini=None,
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-backend",
        "gpuperf_backend",
        "backends to try, comma-separated, in order of preference: hip, cuda, sim (the "
        "simulated device, loudly labelled SIMULATED). 'hip,cuda,sim' falls back to the "
        "simulated device when no GPU is found. Default: 'hip,cuda'.",
        ini="gpuperf_backend",
        metavar="LIST",
    ),
    OptionSpec(
        "--gpuperf-require",
        "gpuperf_require",
        "what a measuring run must find: gpu (a real GPU on any backend), hip or cuda. When "
        "it is not found the session fails with the reasons instead of skipping to green, and "
        "the simulated device is never used. Use it on GPU runners. Under --gpuperf-static "
        "any value (static names only this) requires the clang instead: without one the "
        "tests fail rather than skip. Default: not required.",
        ini="gpuperf_require",
        metavar="KIND",
    ),
    OptionSpec(
        "--gpuperf-device",
        "gpuperf_device",
        "device key to measure against instead of the detected one (e.g. mi300x, h100-sxm): "
        "its datasheet peak bandwidth and caches, and its baseline file. For the sim backend "
        "it selects the simulated model. Default: detected (sim: mi300x).",
        ini="gpuperf_device",
        metavar="KEY",
    ),
    OptionSpec(
        "--gpuperf-gpu",
        "gpuperf_gpu",
        "device index to measure on. Default: 0, or under pytest-xdist worker k's GPU "
        "k mod the number of GPUs.",
        ini="gpuperf_gpu",
        metavar="INDEX",
    ),
    OptionSpec(
        "--gpuperf-gpu-margin",
        "gpuperf_gpu_margin",
        "when pytest-xdist workers measure on several GPUs of one model, a short streaming "
        "probe at the start compares them; a GPU whose bandwidth is more than this fraction "
        "below the median of its peers is named degraded (with its clocks and throttle "
        "reasons) and its verdicts are marked. 0 turns the probe off. "
        f"Default: {DEFAULT_GPU_MARGIN} ({DEFAULT_GPU_MARGIN:.0%}).",
        ini="gpuperf_gpu_margin",
        metavar="FRACTION",
    ),
    OptionSpec(
        "--gpuperf-refuse-degraded",
        "gpuperf_refuse_degraded",
        "do not measure on a GPU the probe found degraded: its workers measure on the healthy "
        "GPUs instead (the run fails when none is left). Default: off (measured, and marked).",
        ini="gpuperf_refuse_degraded",
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-sim-gpus",
        "gpuperf_sim_gpus",
        "how many GPUs the simulated device has: N equal GPUs, or a comma-separated list of "
        "their speeds relative to a healthy GPU (1,1,0.95: the third is 5% slow), so the "
        "multi-GPU path (workers spread over GPUs, the degraded-GPU probe) runs without a "
        "GPU. Default: 1.",
        ini="gpuperf_sim_gpus",
        metavar="SPEEDS",
    ),
    OptionSpec(
        "--gpuperf-baseline-dir",
        "gpuperf_baseline_dir",
        "directory of the per-device baseline files. Default: 'baselines' under the rootdir.",
        ini="gpuperf_baseline_dir",
        metavar="DIR",
    ),
    OptionSpec(
        "--gpuperf-tolerance",
        "gpuperf_tolerance",
        "the smallest relative drop of efficiency below the stored baseline that fails a "
        "test: a test fails when the drop exceeds the larger of this and the noise allowance "
        "(the measurement's own interval and the baseline's run-to-run spread, learned from its "
        "history of saves). 0 leaves the noise allowance alone. "
        f"Default: {DEFAULT_TOLERANCE} ({DEFAULT_TOLERANCE:.0%}, docs/measurement.md).",
        ini="gpuperf_tolerance",
        metavar="FRACTION",
    ),
    OptionSpec(
        "--gpuperf-strict",
        "gpuperf_strict",
        "fail a measured test that has no baseline for this device, and under "
        "--gpuperf-compare one whose comparison stays inconclusive or could not reach the "
        "base revision. Default: off (reported, not failed).",
        ini="gpuperf_strict",
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-compare",
        "gpuperf_compare",
        "A/B in one run: also build every measured kernel from git revision REF's version of "
        "its source (e.g. origin/main on a pull request) and measure head and base "
        "interleaved on the same buffers; a slowdown beyond the threshold fails the test. "
        "Stored baselines are then shown, not gated. Default: off.",
        ini="gpuperf_compare",
        metavar="REF",
    ),
    OptionSpec(
        "--gpuperf-compare-threshold",
        "gpuperf_compare_threshold",
        "the smallest A/B difference (head time / base time - 1) that counts as a "
        "regression or an improvement; very short kernels get a wider one (docs/measurement.md). "
        f"Default: {DEFAULT_COMPARE_THRESHOLD} ({DEFAULT_COMPARE_THRESHOLD:.1%}).",
        ini="gpuperf_compare_threshold",
        metavar="FRACTION",
    ),
    OptionSpec(
        "--gpuperf-compare-code-spread",
        "gpuperf_compare_code_spread",
        "how much two different code objects of equal speed may differ for a whole run, as a "
        "+-95% range per code object: an A/B of changed code is judged at the larger of the "
        "threshold and what this explains (docs/measurement.md, 'Code-object drift'). Set it "
        "from the A/A' rows of bench/gate_quality.py on your GPU. Default: per backend "
        f"({', '.join(f'{k} {v:g}' for k, v in DEFAULT_CODE_SPREAD.items())}).",
        ini="gpuperf_compare_code_spread",
        metavar="FRACTION",
    ),
    OptionSpec(
        "--gpuperf-compare-loads",
        "gpuperf_compare_loads",
        "how many times an A/B comparison loads each side (the same code object as separate "
        "modules; the pairs are spread over the loads) to measure the drift between loads in "
        "the run; below 3 it cannot be estimated and --gpuperf-compare-code-spread is assumed "
        f"instead (docs/measurement.md). Default: {DEFAULT_COMPARE_LOADS}.",
        ini="gpuperf_compare_loads",
        metavar="N",
    ),
    OptionSpec(
        "--gpuperf-compare-force",
        "gpuperf_compare_force",
        "time head and base even when they compiled to byte-identical code objects (an A/A "
        "control), or, on the simulated device, to different code with the same model. "
        "Default: off (reported as unchanged, or modelled, and not timed).",
        ini=None,
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-suite-alarm",
        "gpuperf_suite_alarm",
        "how often a whole run of unchanged kernels may go red: the false-alarm budget of the "
        "run, shared by the tests that measure; an A/B regression fails only when a second "
        "round, on freshly loaded code and fresh buffers, confirms it (docs/measurement.md, "
        "'False alarms of a whole run'). "
        f"Default: {DEFAULT_SUITE_ALARM} ({DEFAULT_SUITE_ALARM:.0%} of runs).",
        ini="gpuperf_suite_alarm",
        metavar="FRACTION",
    ),
    OptionSpec(
        "--gpuperf-compare-missing-ok",
        "gpuperf_compare_missing_ok",
        "run on when git cannot resolve --gpuperf-compare's REF (a pipeline that runs the same "
        "command on branches without a base): every comparison then says 'no base' and the "
        "summary names this option. Default: off (an unresolvable REF stops the run at start, "
        "exit 4, quoting git).",
        ini="gpuperf_compare_missing_ok",
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-prune",
        "gpuperf_prune",
        "remove the baseline entries no test of this run produced (a renamed or removed test, "
        "kernel or measurement), from the files of the devices measured; only files whose "
        "tests were collected are looked at. Default: off (they are listed, not removed).",
        ini=None,
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-history",
        "gpuperf_history",
        "saves of the same code kept per baseline entry by --gpuperf-save; the run-to-run "
        "spread is learned from them once there are 3. "
        f"Default: {HISTORY_LENGTH}.",
        ini="gpuperf_history",
        metavar="N",
    ),
    OptionSpec(
        "--gpuperf-budget",
        "gpuperf_budget",
        "wall-clock seconds of sampling per measurement (sampling stops earlier once the "
        "median's 95% interval is within +-0.5%). Default: 1.0.",
        ini="gpuperf_budget",
        metavar="SECONDS",
    ),
    OptionSpec(
        "--gpuperf-kernel-timeout",
        "gpuperf_kernel_timeout",
        "seconds a wait for the GPU may take before the kernel running is declared hung: the "
        "test fails naming it, the GPU lock is released, the remaining GPU tests fail with "
        "the reason and the reports are still written. Default: 60 + 10 x the budget.",
        ini="gpuperf_kernel_timeout",
        metavar="SECONDS",
    ),
    OptionSpec(
        "--gpuperf-compile-timeout",
        "gpuperf_compile_timeout",
        "seconds a kernel compile may take (the compiler runs in a child process, stopped "
        "after this); a failed compile is remembered for the session. Default: 300.",
        ini="gpuperf_compile_timeout",
        metavar="SECONDS",
    ),
    OptionSpec(
        "--gpuperf-cache",
        "gpuperf_cache",
        "default cache mode: cold (clean read-eviction before every timed launch), hot "
        "(same buffers back to back) or rotate (rotating buffer copies). Default: cold.",
        ini="gpuperf_cache",
        metavar="MODE",
    ),
    OptionSpec(
        "--gpuperf-json",
        "gpuperf_json",
        "write every measurement and verdict to PATH as JSON (versioned schema, "
        "docs/json-schema.md). Default: not written.",
        ini="gpuperf_json",
        metavar="PATH",
    ),
    OptionSpec(
        "--gpuperf-benchmark-json",
        "gpuperf_benchmark_json",
        "write the results to PATH in pytest-benchmark's JSON layout, for "
        "`pytest-benchmark compare`. Default: not written.",
        ini="gpuperf_benchmark_json",
        metavar="PATH",
    ),
    # -- gpuperf-static: the static gate (pytest_gpuperf/static_plugin.py) -------------
    OptionSpec(
        "--gpuperf-static",
        "gpuperf_static",
        "the static gate: compile every kernel a test loads offline with clang for these AMD "
        "GPU architectures (comma-separated, e.g. gfx942 or gfx942,gfx90a), read its "
        "registers, LDS, scratch, spills and the occupancy of the test's launch shape, and "
        "fail on an occupancy drop, new spills or scratch, or VGPR/LDS growth beyond the "
        "margin against baselines/static/<arch>.toml (or, with --gpuperf-compare, against "
        "REF's version of the kernel). The SIMULATED device runs the tests' data flow; nothing "
        "is timed. --gpuperf-save records the facts. Default: off.",
        ini="gpuperf_static",
        metavar="ARCH[,ARCH]",
    ),
    OptionSpec(
        "--gpuperf-clang",
        "gpuperf_clang",
        "the clang the static gate compiles with (a path or a command name). Default: the "
        "first of clang-19, clang-22 .. clang-17, clang and /opt/rocm/llvm/bin/clang on PATH "
        "that compiles HIP for the architecture.",
        ini="gpuperf_clang",
        metavar="PATH",
    ),
    # -- end gpuperf-static ------------------------------------------------------------------
    OptionSpec(
        "--gpuperf-markdown",
        "gpuperf_markdown",
        "write a Markdown summary to PATH, and append it to $GITHUB_STEP_SUMMARY when that "
        "is set. Default: not written.",
        ini="gpuperf_markdown",
        metavar="PATH",
    ),
)


@dataclass(frozen=True)
class Settings:
    """The session's settings; `measure` is true for --gpuperf and for --gpuperf-save."""

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
    compare_threshold: float = DEFAULT_COMPARE_THRESHOLD
    compare_code_spread: float | None = None  # None: the backend's (policy.DEFAULT_CODE_SPREAD)
    compare_loads: int = DEFAULT_COMPARE_LOADS
    compare_force: bool = False
    suite_alarm: float = DEFAULT_SUITE_ALARM
    compare_missing_ok: bool = False  # an unresolvable REF: no base, instead of a usage error
    history_length: int = HISTORY_LENGTH
    prune: bool = False
    budget_s: float = DEFAULT_BUDGET_S
    kernel_timeout_s: float | None = None  # None: 60 s + 10 x budget_s
    compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S
    cache: str = DEFAULT_CACHE
    json_path: Path | None = None
    benchmark_json_path: Path | None = None
    markdown_path: Path | None = None
    static_archs: tuple[str, ...] = ()  # gpuperf-static: --gpuperf-static (empty: off)
    clang: str | None = None  # gpuperf-static: --gpuperf-clang

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
        options = []
        if self.backends != DEFAULT_BACKENDS:
            options.append(f"--gpuperf-backend={','.join(self.backends)}")
        if self.require:
            options.append(f"--gpuperf-require={self.require}")
        if self.device_key:
            options.append(f"--gpuperf-device={self.device_key}")
        if self.cache != DEFAULT_CACHE:
            options.append(f"--gpuperf-cache={self.cache}")
        return options


@dataclass(frozen=True)
class FloorRule:
    """One floor: `value` applies to the measurements it names (None: any name, device key or
    cache mode); `origin` says where it was written, for messages."""

    value: float
    name: str | None = None
    device: str | None = None
    cache: str | None = None
    origin: str = "min_bw"

    def matches(self, name: str, device: str, cache: str) -> bool:
        return all(
            wanted is None or wanted == actual
            for wanted, actual in ((self.name, name), (self.device, device), (self.cache, cache))
        )

    @property
    def specificity(self) -> int:
        return sum(part is not None for part in (self.name, self.device, self.cache))


@dataclass(frozen=True)
class TestSettings:
    """What one test is measured and gated with: the session's settings plus its markers."""

    __test__ = False  # not a test class, whatever pytest's collector thinks of the name

    test_id: str
    floors: tuple[FloorRule, ...] = ()  # closest marker first
    tolerance: float = DEFAULT_TOLERANCE
    cache: str = DEFAULT_CACHE
    budget_s: float = DEFAULT_BUDGET_S
    peak_bps: float | None = None
    strict: bool = False

    def floor_for(self, name: str, device: str, cache: str) -> FloorRule | None:
        """The floor of one measurement: the most specific matching rule, and among equally
        specific ones the closest marker."""
        matching = [rule for rule in self.floors if rule.matches(name, device, cache)]
        if not matching:
            return None
        best = max(rule.specificity for rule in matching)
        return next(rule for rule in matching if rule.specificity == best)


# -- parsing the options --------------------------------------------------------------------


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
        if from_ini is not None and from_ini != "":
            values[spec.dest] = (from_ini, f"{spec.ini} (ini)", rootdir)

    def get(dest: str, parse: Callable[[Any, str], Any], default: Any) -> Any:
        if dest not in values:
            return default
        raw, where, _ = values[dest]
        return parse(raw, where)

    def path(dest: str) -> Path | None:
        if dest not in values:
            return None
        raw, where, base = values[dest]
        text = str(raw).strip()
        if not text:
            raise ConfigError(f"{where}: expected a path, got an empty value")
        return (base / Path(os.path.expanduser(text))).resolve()

    save = get("gpuperf_save", parse_bool, False)
    measure = bool(get("gpuperf", parse_bool, False) or save)
    if get("no_gpuperf", parse_bool, False):
        if save:
            raise ConfigError("--no-gpuperf and --gpuperf-save contradict each other")
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
        compare_threshold=get(
            "gpuperf_compare_threshold", parse_threshold, DEFAULT_COMPARE_THRESHOLD
        ),
        compare_code_spread=get("gpuperf_compare_code_spread", parse_code_spread, None),
        compare_loads=get("gpuperf_compare_loads", parse_loads, DEFAULT_COMPARE_LOADS),
        compare_force=get("gpuperf_compare_force", parse_bool, False),
        suite_alarm=get("gpuperf_suite_alarm", parse_suite_alarm, DEFAULT_SUITE_ALARM),
        compare_missing_ok=get("gpuperf_compare_missing_ok", parse_bool, False),
        history_length=get("gpuperf_history", parse_history, HISTORY_LENGTH),
        prune=get("gpuperf_prune", parse_bool, False),
        budget_s=get("gpuperf_budget", parse_budget, DEFAULT_BUDGET_S),
        kernel_timeout_s=get("gpuperf_kernel_timeout", _seconds("the kernel timeout"), None),
        compile_timeout_s=get(
            "gpuperf_compile_timeout", _seconds("the compile timeout"), DEFAULT_COMPILE_TIMEOUT_S
        ),
        cache=get("gpuperf_cache", parse_cache, DEFAULT_CACHE),
        json_path=path("gpuperf_json"),
        benchmark_json_path=path("gpuperf_benchmark_json"),
        markdown_path=path("gpuperf_markdown"),
        static_archs=static_archs,  # gpuperf-static
        clang=get("gpuperf_clang", parse_clang, None),  # gpuperf-static
    )


def parse_bool(raw: Any, where: str) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{where}: expected true or false, got {raw!r}")


def parse_backends(raw: Any, where: str) -> tuple[str, ...]:
    names = [part.strip().lower() for part in str(raw).split(",") if part.strip()]
    if not names:
        raise ConfigError(f"{where}: name at least one backend ({', '.join(BACKEND_NAMES)})")
    expanded: list[str] = []
    for name in names:
        if name == "auto":
            expanded += DEFAULT_BACKENDS
        elif name in BACKEND_NAMES:
            expanded.append(name)
        else:
            raise ConfigError(
                f"{where}: unknown backend {name!r}; choose from {', '.join(BACKEND_NAMES)} "
                "(comma-separated, in order of preference, e.g. 'hip,cuda,sim')"
            )
    return tuple(dict.fromkeys(expanded))


def parse_require(raw: Any, where: str) -> str:
    kind = str(raw).strip().lower()
    if kind not in REQUIRE_CHOICES:
        raise ConfigError(
            f"{where}: expected one of {', '.join(REQUIRE_CHOICES)} (gpu: any real GPU; "
            "static: the static gate's clang), "
            f"got {raw!r}"
        )
    return kind


def parse_ref(raw: Any, where: str) -> str:
    text = str(raw).strip()
    if not text or text.startswith("-") or any(c.isspace() for c in text):
        raise ConfigError(
            f"{where}: expected a git revision (e.g. origin/main, HEAD~1, a commit id), got {raw!r}"
        )
    return text


# -- gpuperf-static ---------------------------------------------------------------------------
_ARCH_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?::[A-Za-z0-9_]+[+-])*$")


def parse_static_archs(raw: Any, where: str) -> tuple[str, ...]:
    """'gfx942' or 'gfx942,gfx90a' (target ids with features, gfx942:xnack-, allowed).
    Whether clang knows them is checked when the session starts."""
    names = [part.strip() for part in str(raw).split(",") if part.strip()]
    if not names:
        raise ConfigError(f"{where}: name at least one AMD GPU architecture, e.g. gfx942")
    for name in names:
        if not _ARCH_NAME.match(name):
            raise ConfigError(
                f"{where}: {name!r} is not an architecture name; give clang's processor names, "
                "comma-separated (e.g. gfx942 for MI300X, gfx90a for MI250X)"
            )
    return tuple(dict.fromkeys(names))


def parse_clang(raw: Any, where: str) -> str:
    text = os.path.expanduser(str(raw).strip())
    if not text:
        raise ConfigError(f"{where}: expected a clang path or command name, got an empty value")
    return text


# -- end gpuperf-static -------------------------------------------------------------------------


def parse_device_key(raw: Any, where: str) -> str:
    from pytest_gpuperf.devices import KNOWN_DEVICES

    key = str(raw).strip().lower()
    if key not in KNOWN_DEVICES:
        raise ConfigError(
            f"{where}: unknown device key {raw!r}; known keys: {', '.join(KNOWN_DEVICES)}"
        )
    return key


def parse_gpu_index(raw: Any, where: str) -> int:
    text = str(raw).strip()
    if not (text.isascii() and text.isdigit()):
        raise ConfigError(f"{where}: expected a device index (0, 1, ...), got {raw!r}")
    return int(text)


def parse_gpu_margin(raw: Any, where: str) -> float:
    return _fraction(raw, where, "the degraded-GPU margin", low_inclusive=True)


def parse_sim_gpus(raw: Any, where: str) -> tuple[float, ...]:
    """'4' (four equal GPUs) or '1,1,0.95' (relative speeds, one per GPU)."""
    text = str(raw).strip()
    hint = (
        f"expected a number of simulated GPUs (1 to {MAX_SIM_GPUS}) or their relative speeds, "
        f"comma-separated (e.g. 1,1,0.95), got {raw!r}"
    )
    if text.isascii() and text.isdigit():
        if not 1 <= int(text) <= MAX_SIM_GPUS:
            raise ConfigError(f"{where}: {hint}")
        return (1.0,) * int(text)
    parts = [part.strip() for part in text.split(",")]
    if len(parts) < 2 or len(parts) > MAX_SIM_GPUS:
        raise ConfigError(f"{where}: {hint}")
    speeds = []
    for part in parts:
        try:
            speed = float(part)
        except ValueError:
            raise ConfigError(f"{where}: {hint}") from None
        if not (math.isfinite(speed) and 0 < speed <= 10):
            raise ConfigError(f"{where}: speed {part!r} must be in (0, 10] (1 is healthy); {hint}")
        speeds.append(speed)
    return tuple(speeds)


def parse_history(raw: Any, where: str) -> int:
    text = str(raw).strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 100:
        raise ConfigError(f"{where}: expected a number of saves from 1 to 100, got {raw!r}")
    return int(text)


def _fraction(raw: Any, where: str, what: str, *, low_inclusive: bool = False) -> float:
    value = _number(raw, where, what)
    low_ok = value >= 0 if low_inclusive else value > 0
    if not (low_ok and value < 1):
        bracket = "[" if low_inclusive else "("
        raise ConfigError(f"{where}: {what} must be a fraction in {bracket}0, 1), got {raw!r}")
    return value


def _number(raw: Any, where: str, what: str) -> float:
    if isinstance(raw, bool):
        raise ConfigError(f"{where}: {what} must be a number, got {raw!r}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {what} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{where}: {what} must be a finite number, got {raw!r}")
    return value


def parse_tolerance(raw: Any, where: str) -> float:
    return _fraction(
        raw, where, "the tolerance (e.g. 0.01 for 1%; 0 for the noise alone)", low_inclusive=True
    )


def parse_threshold(raw: Any, where: str) -> float:
    return _fraction(raw, where, "the compare threshold (e.g. 0.005 for 0.5%)", low_inclusive=True)


def parse_loads(raw: Any, where: str) -> int:
    text = str(raw).strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 64:
        raise ConfigError(f"{where}: expected a number of module loads from 1 to 64, got {raw!r}")
    return int(text)


def parse_code_spread(raw: Any, where: str) -> float:
    return _fraction(
        raw, where, "the code-object spread (e.g. 0.015 for +-1.5%)", low_inclusive=True
    )


def parse_suite_alarm(raw: Any, where: str) -> float:
    return _fraction(raw, where, "the run's false-alarm budget (e.g. 0.01 for 1% of runs)")


def _seconds(what: str) -> Callable[[Any, str], float]:
    def parse(raw: Any, where: str) -> float:
        value = _number(raw, where, f"{what} in seconds")
        if value <= 0:
            raise ConfigError(f"{where}: {what} must be a positive number of seconds, got {raw!r}")
        return value

    return parse


def parse_budget(raw: Any, where: str) -> float:
    value = _number(raw, where, "the budget in seconds")
    if value <= 0:
        raise ConfigError(f"{where}: the budget must be a positive number of seconds, got {raw!r}")
    return value


def parse_cache(raw: Any, where: str) -> str:
    mode = str(raw).strip().lower() if isinstance(raw, str) else raw
    if mode not in CACHE_MODES:
        raise ConfigError(f"{where}: {cache_mode_problem(raw)}")
    return str(mode)


def cache_mode_problem(raw: Any) -> str:
    """The one sentence every unknown cache mode gets, wherever it was given."""
    return (
        f"unknown cache mode {raw!r}; valid modes: cold (clean read-eviction before every "
        "timed launch), hot (same buffers back to back), rotate (rotating buffer copies)"
    )


# -- the markers ----------------------------------------------------------------------------

MARKER_KEYWORDS = ("tolerance", "cache", "budget_s", "peak_gbps", "strict")
FLOOR_KEYWORDS = ("name", "device", "cache")

MIN_BW_HELP = (
    "min_bw(fraction, name=None, device=None, cache=None): fail a measurement whose bandwidth "
    "efficiency (declared bytes / median kernel time / the device's peak bandwidth) is below "
    "the fraction, 0 < x <= 1 (e.g. min_bw(0.8)). name=, device= and cache= limit it to one "
    "measurement name, device key or cache mode; several min_bw marks may be stacked and the "
    "most specific applies. Applies under --gpuperf."
)
GPUPERF_HELP = (
    "gpuperf(tolerance=, cache=, budget_s=, peak_gbps=, strict=): per-test measurement "
    "settings: baseline tolerance (fraction), default cache mode (cold|hot|rotate), sampling "
    "budget in seconds, peak bandwidth override in GB/s, and whether a missing baseline fails. "
    "Marks on the module, class and test merge by keyword, the closest winning."
)


@dataclass(frozen=True)
class MarkerArgs:
    """A marker's arguments, detached from pytest's Mark."""

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] | None = None


def settings_for_test(
    settings: Settings,
    test_id: str,
    *,
    min_bw: Sequence[MarkerArgs] = (),
    gpuperf: Sequence[MarkerArgs] = (),
) -> TestSettings:
    """The settings for one test; `ConfigError` naming the test for a bad marker.

    `min_bw` and `gpuperf` list the test's marks closest first (as pytest's iter_markers).
    """
    result = TestSettings(
        test_id=test_id,
        tolerance=settings.tolerance,
        cache=settings.cache,
        budget_s=settings.budget_s,
        strict=settings.strict,
    )
    if min_bw:
        result = replace(result, floors=tuple(_floor(test_id, marker) for marker in min_bw))
    merged: dict[str, Any] = {}
    for marker in reversed(tuple(gpuperf)):  # farthest first: the closest overwrites
        merged.update(_gpuperf_keywords(test_id, marker))
    return _apply_gpuperf(result, test_id, merged) if merged else result


def _floor(test_id: str, marker: MarkerArgs) -> FloorRule:
    where = f"{test_id}: @pytest.mark.min_bw"
    kwargs = dict(marker.kwargs or {})
    unknown = sorted(set(kwargs) - set(FLOOR_KEYWORDS))
    if unknown or len(marker.args) != 1:
        raise ConfigError(
            f"{where} takes one positional fraction and optionally name=, device=, cache= "
            f"(e.g. min_bw(0.8) or min_bw(0.6, name='tiled')); got {_call_text(marker)}"
        )
    raw = marker.args[0]
    value = parse_floor(raw, f"{where}({raw!r})")
    rule = {}
    for key in FLOOR_KEYWORDS:
        if key in kwargs:
            given = kwargs[key]
            if not isinstance(given, str) or not given.strip():
                raise ConfigError(f"{where}({key}=...): must be a non-empty string, got {given!r}")
            rule[key] = parse_cache(given, f"{where}(cache=...)") if key == "cache" else given
    if "device" in rule:
        rule["device"] = parse_device_key(rule["device"], f"{where}(device=...)")
    origin = "min_bw" + (
        "(" + ", ".join(f"{k}={v!r}" for k, v in rule.items()) + ")" if rule else ""
    )
    return FloorRule(value=value, origin=origin, **rule)


def parse_floor(raw: Any, where: str) -> float:
    """A floor: an efficiency fraction in (0, 1]."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ConfigError(
            f"{where}: the floor must be a number, the fraction of the device's peak "
            "bandwidth the kernel must reach (0 < x <= 1), e.g. min_bw(0.8)"
        )
    value = float(raw)
    if not (math.isfinite(value) and 0 < value <= 1):
        hint = f" (a percentage? did you mean {value / 100:g}?)" if 2 <= value <= 100 else ""
        raise ConfigError(
            f"{where}: the floor is a fraction of the peak bandwidth and must be in (0, 1]{hint}"
        )
    return value


def _gpuperf_keywords(test_id: str, marker: MarkerArgs) -> dict[str, Any]:
    where = f"{test_id}: @pytest.mark.gpuperf"
    if marker.args:
        raise ConfigError(
            f"{where} takes keyword arguments only ({', '.join(MARKER_KEYWORDS)}); got "
            f"{_call_text(marker)}"
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
        gbps = _number(kwargs["peak_gbps"], f"{where}(peak_gbps=...)", "peak_gbps")
        if gbps <= 0:
            raise ConfigError(f"{where}(peak_gbps=...): must be positive GB/s, got {gbps!r}")
        changes["peak_bps"] = gbps * 1e9
    if "strict" in kwargs:
        if not isinstance(kwargs["strict"], bool):
            raise ConfigError(f"{where}(strict=...): must be True or False")
        changes["strict"] = kwargs["strict"]
    return replace(result, **changes)


def _call_text(marker: MarkerArgs) -> str:
    parts = [repr(a) for a in marker.args]
    parts += [f"{k}={v!r}" for k, v in (marker.kwargs or {}).items()]
    return f"({', '.join(parts)})"


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


def describe(settings: Settings) -> str:
    """One header line with the settings that decide a verdict."""
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
        loaded = f", {loads} loads per side" if loads != DEFAULT_COMPARE_LOADS else ""
        parts.append(
            f"A/B against {settings.compare_ref} (threshold {settings.compare_threshold:.1%}"
            f"{spread}{loaded}{forced})"
        )
    if settings.suite_alarm != DEFAULT_SUITE_ALARM:
        parts.append(f"suite false alarms {settings.suite_alarm:.1%}")
    if settings.require:
        parts.append(f"requires {settings.require}")
    if settings.device_key:
        parts.append(f"device {settings.device_key}")
    if settings.gpu_index is not None:
        parts.append(f"gpu {settings.gpu_index}")
    if settings.strict:
        parts.append("strict")
    parts.append(f"baselines {settings.baseline_dir}")
    return ", ".join(parts)


__all__ = [
    "OPTIONS",
    "FloorRule",
    "MarkerArgs",
    "OptionSpec",
    "Settings",
    "TestSettings",
    "build_settings",
    "settings_for_test",
]
