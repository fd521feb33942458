"""Every option of the plugin, declared once: flag, ini key, help text and default.

Registering the options (plugin/__init__.py), building the settings from them (settings.py) and the
docs' option table read this one table, so a flag, its ini key and its help cannot drift apart.
The markers' help texts live here too, for the same reason. No pytest import here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_gpuperf.engine.policy import DEFAULT_PAIR_LOADS, HARD_LIMIT_MIN_S, HARD_LIMIT_MULTIPLE
from pytest_gpuperf.gate.policy import (
    DEFAULT_CODE_SPREAD,
    DEFAULT_COMPARE_THRESHOLD,
    DEFAULT_TOLERANCE,
    HISTORY_LENGTH,
)
from pytest_gpuperf.gate.suite import DEFAULT_SUITE_ALARM

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
DEFAULT_EXPLAIN_TIMEOUT_S = 120.0  # a child that compiles, profiles two launches and exits
MAX_SIM_GPUS = 64
INI_HELP_WIDTH = 52  # what fits beside the key in `pytest --help` at 80 columns


@dataclass(frozen=True)
class OptionSpec:
    """One command-line option and its ini equivalent (None: deliberately command-line only).

    `help` is what `pytest --help` prints: one or two lines that say what it does and its
    default (docs/writing-perf-tests.md has the whole story). The ini key's own help is the
    start of it, and `ini_type` is its real type (int and float where pytest has them).
    """

    flag: str  # "--gpuperf-tolerance"
    dest: str  # "gpuperf_tolerance"
    help: str
    ini: str | None
    is_flag: bool = False
    metavar: str | None = None
    ini_type: str = "string"  # "bool" for flags; "int", "float" for numbers
    repeatable: bool = False  # given several times (the ini key: one value a line)

    @property
    def ini_help(self) -> str:
        """The ini key's line in `pytest --help`: the start of the option's own help, within
        the one line pytest leaves beside the key (the option's help says the rest)."""
        sentence_end = r"(?<=[.;])(?<!e\.g\.)(?<!i\.e\.)\s"  # "e.g. mi300x" goes on
        first = re.split(sentence_end, self.help, maxsplit=1)[0].rstrip(".;")
        if len(first) <= INI_HELP_WIDTH:
            return first
        return first[: INI_HELP_WIDTH - 1].rsplit(" ", 1)[0] + "…"


def _spread_defaults() -> str:
    return ", ".join(f"{k} {v:g}" for k, v in DEFAULT_CODE_SPREAD.items())


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "--gpuperf",
        "gpuperf",
        "measure and gate every gpu_bench call. Default: off (smoke: one launch each).",
        ini="gpuperf",
        is_flag=True,
    ),
    OptionSpec(
        "--no-gpuperf",
        "no_gpuperf",
        "smoke mode for this run, whatever the ini file says.",
        ini=None,
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-save",
        "gpuperf_save",
        "record <baseline-dir>/<device>.toml (<device>-sim.toml when simulated); implies "
        "--gpuperf.",
        ini=None,
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-backend",
        "gpuperf_backend",
        "backends to try, in order: hip, cuda, sim (SIMULATED). Default: hip,cuda.",
        ini="gpuperf_backend",
        metavar="LIST",
    ),
    OptionSpec(
        "--gpuperf-require",
        "gpuperf_require",
        "gpu, hip or cuda: none fails the run; static: only with --gpuperf-static "
        "(alone: exit 4). Default: none.",
        ini="gpuperf_require",
        metavar="KIND",
    ),
    OptionSpec(
        "--gpuperf-device",
        "gpuperf_device",
        "device key (e.g. mi300x, h100-sxm): its peak, caches, baseline file. Default: "
        "detected (sim: mi300x).",
        ini="gpuperf_device",
        metavar="KEY",
    ),
    OptionSpec(
        "--gpuperf-gpu",
        "gpuperf_gpu",
        "GPU index. Default: 0 (xdist: worker k mod GPUs).",
        ini="gpuperf_gpu",
        metavar="INDEX",
        ini_type="int",
    ),
    OptionSpec(
        "--gpuperf-gpu-margin",
        "gpuperf_gpu_margin",
        "xdist over GPUs: one this fraction below its peers' probe is degraded; 0: no "
        f"probe. Default: {DEFAULT_GPU_MARGIN}.",
        ini="gpuperf_gpu_margin",
        metavar="FRACTION",
        ini_type="float",
    ),
    OptionSpec(
        "--gpuperf-refuse-degraded",
        "gpuperf_refuse_degraded",
        "do not measure on a degraded GPU. Default: marked.",
        ini="gpuperf_refuse_degraded",
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-sim-gpus",
        "gpuperf_sim_gpus",
        "simulated GPUs: N, or speeds (1,1,0.95). Default: 1.",
        ini="gpuperf_sim_gpus",
        metavar="SPEEDS",
    ),
    OptionSpec(
        "--gpuperf-baseline-dir",
        "gpuperf_baseline_dir",
        "baseline files' folder. Default: <rootdir>/baselines.",
        ini="gpuperf_baseline_dir",
        metavar="DIR",
    ),
    OptionSpec(
        "--gpuperf-tolerance",
        "gpuperf_tolerance",
        "a drop below the stored baseline fails beyond the larger of this and the noise "
        f"its saves show. Default: {DEFAULT_TOLERANCE}.",
        ini="gpuperf_tolerance",
        metavar="FRACTION",
        ini_type="float",
    ),
    OptionSpec(
        "--gpuperf-strict",
        "gpuperf_strict",
        "fail, not report: no baseline here (while baselines gate), a modelled verdict, "
        "an A/B inconclusive or without its base, a kernel without stored facts (static), "
        "a drift across saves, a measurement not taken.",
        ini="gpuperf_strict",
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-compare",
        "gpuperf_compare",
        "A/B: each kernel against its source at git REF (origin/main), in this run. Default: off.",
        ini="gpuperf_compare",
        metavar="REF",
    ),
    OptionSpec(
        "--gpuperf-head",
        "gpuperf_head",
        "build the kernels from git REF (with --gpuperf-compare: commit against commit). "
        "Default: the work tree.",
        ini=None,
        metavar="REF",
    ),
    OptionSpec(
        "--gpuperf-compare-threshold",
        "gpuperf_compare_threshold",
        f"smallest A/B change (head/base - 1). Default: {DEFAULT_COMPARE_THRESHOLD}.",
        ini="gpuperf_compare_threshold",
        metavar="FRACTION",
        ini_type="float",
    ),
    OptionSpec(
        "--gpuperf-compare-code-spread",
        "gpuperf_compare_code_spread",
        f"code-object drift assumed when not measured (loads < 3). Default: {_spread_defaults()}.",
        ini="gpuperf_compare_code_spread",
        metavar="FRACTION",
        ini_type="float",
    ),
    OptionSpec(
        "--gpuperf-compare-loads",
        "gpuperf_compare_loads",
        f"loads per side (measures their drift). Default: {DEFAULT_PAIR_LOADS}.",
        ini="gpuperf_compare_loads",
        metavar="N",
        ini_type="int",
    ),
    OptionSpec(
        "--gpuperf-compare-buffer-sets",
        "gpuperf_compare_buffer_sets",
        "A/B load j runs on buffer set j mod N (1: the test's own). Default: one per load.",
        ini="gpuperf_compare_buffer_sets",
        metavar="N",
        ini_type="int",
    ),
    OptionSpec(
        "--gpuperf-compare-force",
        "gpuperf_compare_force",
        "time head and base even when their code is identical.",
        ini=None,
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-code-facts",
        "gpuperf_code_facts",
        "code facts of every A/B row, not only failures.",
        ini=None,
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-suite-alarm",
        "gpuperf_suite_alarm",
        f"false-alarm budget of the whole run. Default: {DEFAULT_SUITE_ALARM}.",
        ini="gpuperf_suite_alarm",
        metavar="FRACTION",
        ini_type="float",
    ),
    OptionSpec(
        "--gpuperf-accept",
        "gpuperf_accept",
        "accept a slowdown ('t.py::* why'), repeatable; or a trailer "
        "'Gpuperf-Accept: PATTERN why'. Default: none.",
        ini="gpuperf_accept",
        metavar="PATTERN",
        ini_type="linelist",
        repeatable=True,
    ),
    OptionSpec(
        "--gpuperf-shard",
        "gpuperf_shard",
        "shard K of N (2/3) at the suite's budget; `gpuperf merge` joins them. Default: off.",
        ini=None,
        metavar="K/N",
    ),
    OptionSpec(
        "--gpuperf-compare-missing-ok",
        "gpuperf_compare_missing_ok",
        "run on when git cannot resolve REF (every A/B: no base). Default: exit 4.",
        ini="gpuperf_compare_missing_ok",
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-prune",
        "gpuperf_prune",
        "remove baseline entries no collected test produced. Default: listed.",
        ini=None,
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-history",
        "gpuperf_history",
        f"saves kept per baseline entry. Default: {HISTORY_LENGTH}.",
        ini="gpuperf_history",
        metavar="N",
        ini_type="int",
    ),
    OptionSpec(
        "--gpuperf-budget",
        "gpuperf_budget",
        f"seconds of sampling per measurement. Default: {DEFAULT_BUDGET_S}.",
        ini="gpuperf_budget",
        metavar="SECONDS",
        ini_type="float",
    ),
    OptionSpec(
        "--gpuperf-hard-limit",
        "gpuperf_hard_limit",
        f"measurement's hard limit, x budget (>={HARD_LIMIT_MIN_S:g} s). Default: "
        f"{HARD_LIMIT_MULTIPLE:g}.",
        ini="gpuperf_hard_limit",
        metavar="MULTIPLE",
        ini_type="float",
    ),
    OptionSpec(
        "--gpuperf-kernel-timeout",
        "gpuperf_kernel_timeout",
        "hung-kernel timeout, s. Default: 60 + 10 x budget.",
        ini="gpuperf_kernel_timeout",
        metavar="SECONDS",
        ini_type="float",
    ),
    OptionSpec(
        "--gpuperf-compile-timeout",
        "gpuperf_compile_timeout",
        f"seconds a kernel compile may take. Default: {DEFAULT_COMPILE_TIMEOUT_S:g}.",
        ini="gpuperf_compile_timeout",
        metavar="SECONDS",
        ini_type="float",
    ),
    OptionSpec(
        "--gpuperf-cache",
        "gpuperf_cache",
        f"cold, hot or rotate. Default: {DEFAULT_CACHE}.",
        ini="gpuperf_cache",
        metavar="MODE",
    ),
    OptionSpec(
        "--gpuperf-explain",
        "gpuperf_explain",
        "profile head and base of every measured test (ncu). Default: confirmed regressions.",
        ini="gpuperf_explain",
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-check-bytes",
        "gpuperf_check_bytes",
        "declared bytes against the GPU's counters. Default: off.",
        ini="gpuperf_check_bytes",
        is_flag=True,
    ),
    OptionSpec(
        "--gpuperf-explain-timeout",
        "gpuperf_explain_timeout",
        f"seconds for a profiled re-run. Default: {DEFAULT_EXPLAIN_TIMEOUT_S:g}.",
        ini=None,
        metavar="SECONDS",
    ),
    OptionSpec(
        "--gpuperf-json",
        "gpuperf_json",
        "write the JSON report. Default: none.",
        ini="gpuperf_json",
        metavar="PATH",
    ),
    OptionSpec(
        "--gpuperf-benchmark-json",
        "gpuperf_benchmark_json",
        "write pytest-benchmark's JSON layout. Default: none.",
        ini="gpuperf_benchmark_json",
        metavar="PATH",
    ),
    # -- gpuperf-static: the static gate (pytest_gpuperf/plugin/static_gate.py) -------------
    OptionSpec(
        "--gpuperf-static",
        "gpuperf_static",
        "static gate (clang only; none: exit 4): lost occupancy, spills, scratch, "
        "VGPR/LDS growth fail. Default: off.",
        ini="gpuperf_static",
        metavar="ARCH[,ARCH]",
    ),
    OptionSpec(
        "--gpuperf-clang",
        "gpuperf_clang",
        "the static gate's clang. Default: clang-19, clang-22 .. clang-17, clang, ROCm's.",
        ini="gpuperf_clang",
        metavar="PATH",
    ),
    # -- end gpuperf-static ------------------------------------------------------------------
    OptionSpec(
        "--gpuperf-markdown",
        "gpuperf_markdown",
        "write a Markdown summary (+ $GITHUB_STEP_SUMMARY). Default: none.",
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
MIN_FLOPS_HELP = (
    "min_flops(fraction, name=None, device=None, cache=None): fail a measurement whose compute "
    "efficiency (declared flops= / median kernel time / the device's dense peak FLOP/s for the "
    "declared math=) is below the fraction, 0 < x <= 1 (e.g. min_flops(0.6)); a measurement it "
    "applies to must declare flops= and math=. name=, device=, cache= as for min_bw. Applies "
    "under --gpuperf."
)
MIN_ROOFLINE_HELP = (
    "min_roofline(fraction, name=None, device=None, cache=None): fail a measurement whose "
    "achieved FLOP/s is below the fraction of the roof that binds at its arithmetic intensity "
    "(flops= / declared bytes): min(peak FLOP/s, intensity x peak bandwidth), 0 < x <= 1 "
    "(e.g. min_roofline(0.7)); a measurement it applies to must declare flops= and math=. "
    "name=, device=, cache= as for min_bw. Applies under --gpuperf."
)
GPUPERF_HELP = (
    "gpuperf(tolerance=, cache=, budget_s=, peak_gbps=, strict=): per-test measurement "
    "settings: baseline tolerance (fraction), default cache mode (cold|hot|rotate), sampling "
    "budget in seconds, peak bandwidth override in GB/s, and strict (--gpuperf-strict for this "
    "test). "
    "Marks on the module, class and test merge by keyword, the closest winning."
)
