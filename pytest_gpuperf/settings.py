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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.results import CACHE_MODES

BACKEND_NAMES = ("hip", "cuda", "sim")
DEFAULT_BACKENDS = ("hip", "cuda")
DEFAULT_SIM_DEVICE = "mi300x"
# The regression a gate exists to catch is a kernel change costing several percent; 5% sits
# above the run-to-run noise of an NVIDIA H100 (do_bench CV 0.23%) and, combined with the
# recorded run spread (verdict.py), keeps MI300X's +-7% drift from raising false alarms.
DEFAULT_TOLERANCE = 0.05
DEFAULT_BUDGET_S = 1.0
DEFAULT_CACHE = "cold"
DEFAULT_BASELINE_DIR = "baselines"

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
        "--gpuperf-save",
        "gpuperf_save",
        "record the measurements as baselines in <baseline-dir>/<device>.toml (merged with "
        "the entries already there) after their floor check passed; implies --gpuperf. "
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
        "--gpuperf-baseline-dir",
        "gpuperf_baseline_dir",
        "directory of the per-device baseline files. Default: 'baselines' under the rootdir.",
        ini="gpuperf_baseline_dir",
        metavar="DIR",
    ),
    OptionSpec(
        "--gpuperf-tolerance",
        "gpuperf_tolerance",
        "relative drop of efficiency below the baseline tolerated before a test fails, on top "
        "of the measurement noise and the baseline's recorded run-to-run spread. "
        "Default: 0.05 (5%, see docs/writing-perf-tests.md).",
        ini="gpuperf_tolerance",
        metavar="FRACTION",
    ),
    OptionSpec(
        "--gpuperf-strict",
        "gpuperf_strict",
        "fail a measured test that has no baseline for this device. "
        "Default: off (reported, not failed).",
        ini="gpuperf_strict",
        is_flag=True,
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
    device_key: str | None = None
    gpu_index: int | None = None
    baseline_dir: Path = Path(DEFAULT_BASELINE_DIR)
    tolerance: float = DEFAULT_TOLERANCE
    strict: bool = False
    budget_s: float = DEFAULT_BUDGET_S
    cache: str = DEFAULT_CACHE
    json_path: Path | None = None
    benchmark_json_path: Path | None = None
    markdown_path: Path | None = None

    def command_options(self) -> list[str]:
        """The options a re-run needs to measure the same way (for the update command)."""
        options = []
        if self.backends != DEFAULT_BACKENDS:
            options.append(f"--gpuperf-backend={','.join(self.backends)}")
        if self.device_key:
            options.append(f"--gpuperf-device={self.device_key}")
        if self.cache != DEFAULT_CACHE:
            options.append(f"--gpuperf-cache={self.cache}")
        return options


@dataclass(frozen=True)
class TestSettings:
    """What one test is measured and gated with: the session's settings plus its markers."""

    __test__ = False  # not a test class, whatever pytest's collector thinks of the name

    test_id: str
    floor: float | None = None
    tolerance: float = DEFAULT_TOLERANCE
    cache: str = DEFAULT_CACHE
    budget_s: float = DEFAULT_BUDGET_S
    peak_bps: float | None = None
    strict: bool = False


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
    baseline_dir = path("gpuperf_baseline_dir") or (rootdir / DEFAULT_BASELINE_DIR)
    return Settings(
        measure=bool(get("gpuperf", parse_bool, False) or save),
        save=save,
        backends=get("gpuperf_backend", parse_backends, DEFAULT_BACKENDS),
        device_key=get("gpuperf_device", parse_device_key, None),
        gpu_index=get("gpuperf_gpu", parse_gpu_index, None),
        baseline_dir=baseline_dir,
        tolerance=get("gpuperf_tolerance", parse_tolerance, DEFAULT_TOLERANCE),
        strict=get("gpuperf_strict", parse_bool, False),
        budget_s=get("gpuperf_budget", parse_budget, DEFAULT_BUDGET_S),
        cache=get("gpuperf_cache", parse_cache, DEFAULT_CACHE),
        json_path=path("gpuperf_json"),
        benchmark_json_path=path("gpuperf_benchmark_json"),
        markdown_path=path("gpuperf_markdown"),
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
    if not text.isdigit():
        raise ConfigError(f"{where}: expected a device index (0, 1, ...), got {raw!r}")
    return int(text)


def _fraction(raw: Any, where: str, what: str, *, high_inclusive: bool) -> float:
    value = _number(raw, where, what)
    upper_ok = value <= 1 if high_inclusive else value < 1
    if not (value > 0 and upper_ok):
        bound = "1]" if high_inclusive else "1)"
        raise ConfigError(f"{where}: {what} must be a fraction in (0, {bound}, got {raw!r}")
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
    return _fraction(raw, where, "the tolerance (e.g. 0.05 for 5%)", high_inclusive=False)


def parse_budget(raw: Any, where: str) -> float:
    value = _number(raw, where, "the budget in seconds")
    if value <= 0:
        raise ConfigError(f"{where}: the budget must be a positive number of seconds, got {raw!r}")
    return value


def parse_cache(raw: Any, where: str) -> str:
    mode = str(raw).strip().lower() if isinstance(raw, str) else raw
    if mode not in CACHE_MODES:
        raise ConfigError(f"{where}: {cache_mode_problem(raw)}")
    return mode


def cache_mode_problem(raw: Any) -> str:
    """The one sentence every unknown cache mode gets, wherever it was given."""
    return (
        f"unknown cache mode {raw!r}; valid modes: cold (clean read-eviction before every "
        "timed launch), hot (same buffers back to back), rotate (rotating buffer copies)"
    )


# -- the markers ----------------------------------------------------------------------------

MARKER_KEYWORDS = ("tolerance", "cache", "budget_s", "peak_gbps", "strict")

MIN_BW_HELP = (
    "min_bw(fraction): fail the test when its measured bandwidth efficiency (declared bytes / "
    "median kernel time / the device's peak bandwidth) is below the fraction, 0 < x <= 1 "
    "(e.g. min_bw(0.8)). Applies under --gpuperf."
)
GPUPERF_HELP = (
    "gpuperf(tolerance=, cache=, budget_s=, peak_gbps=, strict=): per-test measurement "
    "settings: baseline tolerance (fraction), default cache mode (cold|hot|rotate), sampling "
    "budget in seconds, peak bandwidth override in GB/s, and whether a missing baseline fails."
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
    min_bw: MarkerArgs | None = None,
    gpuperf: MarkerArgs | None = None,
) -> TestSettings:
    """The settings for one test; `ConfigError` naming the test for a bad marker."""
    result = TestSettings(
        test_id=test_id,
        tolerance=settings.tolerance,
        cache=settings.cache,
        budget_s=settings.budget_s,
        strict=settings.strict,
    )
    if min_bw is not None:
        result = replace(result, floor=_floor(test_id, min_bw))
    if gpuperf is not None:
        result = _apply_gpuperf_marker(result, test_id, gpuperf)
    return result


def _floor(test_id: str, marker: MarkerArgs) -> float:
    where = f"{test_id}: @pytest.mark.min_bw"
    if marker.kwargs or len(marker.args) != 1:
        raise ConfigError(
            f"{where} takes exactly one positional fraction, e.g. min_bw(0.8); got "
            f"{_call_text(marker)}"
        )
    raw = marker.args[0]
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ConfigError(
            f"{where}({raw!r}): the floor must be a number, the fraction of the device's peak "
            "bandwidth the kernel must reach (0 < x <= 1), e.g. min_bw(0.8)"
        )
    value = float(raw)
    if not (math.isfinite(value) and 0 < value <= 1):
        hint = f" (a percentage? did you mean {value / 100:g}?)" if 2 <= value <= 100 else ""
        raise ConfigError(
            f"{where}({raw!r}): the floor is a fraction of the peak bandwidth and must be in "
            f"(0, 1]{hint}"
        )
    return value


def _apply_gpuperf_marker(result: TestSettings, test_id: str, marker: MarkerArgs) -> TestSettings:
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


def gpu_index_for(settings: Settings, device_count: int | None, worker: int | None) -> int:
    """The device index to open: the explicit one, else worker k's GPU k mod the count."""
    if settings.gpu_index is not None:
        return settings.gpu_index
    if worker is None:
        return 0
    return worker % device_count if device_count else 0


def describe(settings: Settings) -> str:
    """One header line with the settings that decide a verdict."""
    mode = "save baselines" if settings.save else "measure and gate"
    parts = [
        mode,
        f"backends {','.join(settings.backends)}",
        f"cache {settings.cache}",
        f"tolerance {settings.tolerance:.0%}",
        f"budget {settings.budget_s:g} s",
    ]
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
    "MarkerArgs",
    "OptionSpec",
    "Settings",
    "TestSettings",
    "build_settings",
    "settings_for_test",
]
