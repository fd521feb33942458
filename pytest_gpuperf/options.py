"""Every option of the plugin, declared once: flag, ini key, help text and default.

Registering the options (plugin.py), building the settings from them (settings.py) and the
docs' option table read this one table, so a flag, its ini key and its help cannot drift apart.
The markers' help texts live here too, for the same reason. No pytest import here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gpuperf.gate.policy import (
    DEFAULT_CODE_SPREAD,
    DEFAULT_COMPARE_LOADS,
    DEFAULT_COMPARE_THRESHOLD,
    DEFAULT_TOLERANCE,
    HISTORY_LENGTH,
)
from pytest_gpuperf.gate.suite import DEFAULT_SUITE_ALARM
from pytest_gpuperf.ranges import (
    CODE_SPREAD,
    COMPARE_THRESHOLD,
    GPU_MARGIN,
    SUITE_ALARM,
    TOLERANCE,
)

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


@dataclass(frozen=True)
class OptionSpec:
    """One command-line option and its ini equivalent (None: deliberately command-line only)."""

    flag: str  # "--gpuperf-tolerance"
    dest: str  # "gpuperf_tolerance"
    help: str
    ini: str | None
    is_flag: bool = False
    metavar: str | None = None
    repeatable: bool = False  # given several times (the ini key: one value a line)


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
        "the simulated device is never used. Use it on GPU runners. (--gpuperf-static "
        "always requires its clang: without one the run stops, exit 4; 'static' is accepted "
        "there and changes nothing.) Default: not required.",
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
        f"Range {GPU_MARGIN.text}. Default: {DEFAULT_GPU_MARGIN} ({DEFAULT_GPU_MARGIN:.0%}).",
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
        f"history of saves). 0 leaves the noise allowance alone. Range {TOLERANCE.text}. "
        f"Default: {DEFAULT_TOLERANCE} ({DEFAULT_TOLERANCE:.0%}, docs/measurement.md).",
        ini="gpuperf_tolerance",
        metavar="FRACTION",
    ),
    OptionSpec(
        "--gpuperf-strict",
        "gpuperf_strict",
        "fail what a run could not judge by measuring: a measured test with no baseline for "
        "this device (while stored baselines gate), a verdict the simulated device only "
        "modelled (changed code, unchanged model: xfailed otherwise), under "
        "--gpuperf-compare a comparison that stays inconclusive or could not reach the base "
        "revision, under --gpuperf-static a kernel without stored facts or base version, and "
        "a drift across saves (a stored entry's level fell across the baselines it replaced "
        "beyond their noise, each step within it). Default: off (reported, not failed).",
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
        "--gpuperf-head",
        "gpuperf_head",
        "build every kernel from git revision REF's version of its source instead of the work "
        "tree's (the test files stay the work tree's): with --gpuperf-compare it measures one "
        "commit against another, which is how `python -m pytest_gpuperf.bisect` probes a "
        "commit. Default: the work tree.",
        ini=None,
        metavar="REF",
    ),
    OptionSpec(
        "--gpuperf-compare-threshold",
        "gpuperf_compare_threshold",
        "the smallest A/B difference (head time / base time - 1) that counts as a "
        "regression or an improvement; very short kernels get a wider one (docs/measurement.md). "
        f"Range {COMPARE_THRESHOLD.text}. "
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
        "from the A/A' rows of bench/gate_quality.py on your GPU. "
        f"Range {CODE_SPREAD.text}. Default: per backend "
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
        "--gpuperf-compare-buffer-sets",
        "gpuperf_compare_buffer_sets",
        "how many sets of buffers an A/B comparison spreads its module loads over (the test's "
        "own buffers and fresh device copies of them; load j runs on set j mod N), so the "
        "interval also carries where the buffers landed, which a second round on fresh "
        "buffers draws anew; at most one per load; 1 runs every pair on the test's own "
        "buffers (docs/measurement.md, 'Buffer sets'). Default: one per load.",
        ini="gpuperf_compare_buffer_sets",
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
        f"Range {SUITE_ALARM.text}. "
        f"Default: {DEFAULT_SUITE_ALARM} ({DEFAULT_SUITE_ALARM:.0%} of runs).",
        ini="gpuperf_suite_alarm",
        metavar="FRACTION",
    ),
    OptionSpec(
        "--gpuperf-accept",
        "gpuperf_accept",
        "accept an intended slowdown: a confirmed regression of the tests whose id matches "
        "the glob passes as 'accepted', listed with the reason (the words after it: "
        "'test_rms.py::* fused epilogue'). Repeatable. A 'Gpuperf-Accept: PATTERN <reason>' "
        "commit trailer in REF..HEAD of --gpuperf-compare does the same (docs/ci.md). "
        "Default: none.",
        ini="gpuperf_accept",
        metavar="PATTERN",
        repeatable=True,
    ),
    OptionSpec(
        "--gpuperf-shard",
        "gpuperf_shard",
        "run shard K of N (e.g. 2/3) of the tests, one shard per CI runner: the measuring "
        "tests are dealt out by the cost their baselines record (time x samples of the last "
        "save, the median over an entry's saves; by count where none is recorded), the "
        "others round-robin; every shard judges "
        "its tests at the whole suite's false-alarm budget, and `python -m "
        "pytest_gpuperf.merge` makes one report of the shards' JSON (docs/ci.md). "
        "Default: off (every test runs here).",
        ini=None,
        metavar="K/N",
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
        "is timed. --gpuperf-save records the facts. Needs only a clang (Debian: clang-19), "
        "no ROCm; without a usable clang the run stops (exit 4) naming what was tried. "
        "Default: off.",
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
    "budget in seconds, peak bandwidth override in GB/s, and strict (--gpuperf-strict for this "
    "test). "
    "Marks on the module, class and test merge by keyword, the closest winning."
)
