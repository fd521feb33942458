"""One pytest session's GPU state: the device (opened once, lazily), compiled modules, the
baseline store, and the judging of a test's measurements (verdict, baseline save).

plugin.py holds a `BenchSession` and calls it from hooks; nothing here imports pytest, so the
same logic serves a script or another test runner.
"""

from __future__ import annotations

import importlib
import math
import os
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_gpuperf import verdict as gate
from pytest_gpuperf.devices import DeviceMatch, match_device
from pytest_gpuperf.errors import Attempt, DeviceUnavailable, GpuPerfError
from pytest_gpuperf.gpu_lock import GpuLock
from pytest_gpuperf.results import (
    FAIL,
    MARGINAL,
    NO_BASELINE,
    OTHER_DEVICE,
    PASS,
    Measurement,
    Verdict,
)
from pytest_gpuperf.runtime import BACKENDS, open_backend
from pytest_gpuperf.runtime.base import Backend, DeviceInfo, Module
from pytest_gpuperf.settings import DEFAULT_SIM_DEVICE, Settings, TestSettings, gpu_index_for

# Relative run-to-run spread recorded with a baseline saved on this backend, when repeated
# saves at one commit have not shown a larger one. A measurement's own interval says nothing
# about the next run. AMD: the seed's "+-7%" between runs of one kernel on MI300X
# (seeds/mi300x-memory-bound-kernels-blog.txt). NVIDIA: 2%, well above the 0.23% run-to-run
# CV of do_bench on the project's H100 (DESIGN.md), because other boards and clock policies
# vary more. The simulated device records the spread it was configured with.
DEFAULT_RUN_SPREAD = {"hip": 0.07, "cuda": 0.02, "sim": 0.07}
# A launch's fixed cost moves between machines and runs by more than a share of a long
# kernel: on the project's H100s (2026-11-23) cold kernels of 4.5-8 us took up to 0.35 us
# longer on one machine than on the others, where kernels of 20 us and more agreed within
# 1.5% (docs/writing-perf-tests.md). The default spread of a real GPU therefore adds this
# much time, as a standard deviation, to the backend's relative figure.
LAUNCH_JITTER_S = 0.2e-6


@dataclass(frozen=True)
class OpenDevice:
    """The session's device: the backend, the spec it is measured against, its GPU lock,
    and the backends that were passed over to reach it (a fallback to "sim" says why)."""

    backend: Backend
    match: DeviceMatch
    lock: GpuLock
    passed_over: tuple[Attempt, ...] = ()

    @property
    def info(self) -> DeviceInfo:
        return self.backend.info

    @property
    def simulated(self) -> bool:
        return self.backend.info.simulated

    def describe(self) -> list[str]:
        """Header lines: the device, and loudly, whether it is simulated and why."""
        info, spec = self.info, self.match.spec
        where = f"GPU {info.index}" + (f" ({info.pci_bus_id})" if info.pci_bus_id else "")
        line = (
            f"{info.name} [{spec.key}] via {info.backend}, {where}, {info.arch}, "
            f"peak {spec.peak_bps / 1e12:.2f} TB/s ({self.match.how})"
        )
        lines = [f"gpuperf device: {line}"]
        if self.simulated:
            seed = getattr(self.backend, "seed", None)
            seeded = f", seed {seed} (GPUPERF_SIM_SEED={seed} reproduces it)" if seed else ""
            lines.append(
                f"gpuperf device: *** SIMULATED *** times come from a model, not a GPU{seeded}"
            )
        if self.passed_over:
            tried = "; ".join(f"{a.backend}: {a.reason}" for a in self.passed_over)
            lines.append(f"gpuperf device: *** FELL BACK to {info.backend}: {tried}")
        if self.match.warning:
            lines.append(f"gpuperf device: warning: {self.match.warning}")
        return lines


@dataclass(frozen=True)
class Judgement:
    """What the gate made of one test's measurements."""

    verdicts: tuple[tuple[Measurement, Verdict], ...]
    failures: tuple[str, ...] = ()  # reasons of failed verdicts: the test fails with them
    warnings: tuple[str, ...] = ()  # reasons of marginal verdicts
    properties: tuple[tuple[str, str], ...] = ()  # for record_property / JUnit XML
    saved_to: Path | None = None


@dataclass(frozen=True)
class GitFacts:
    commit: str = ""
    branch: str = ""
    dirty: bool = False
    commit_time: str = ""

    @property
    def stamp(self) -> str:
        """The commit as provenance records it: '<sha>' or '<sha>-dirty'."""
        return f"{self.commit}-dirty" if self.commit and self.dirty else self.commit


def git_facts(directory: Path, *, ignore: Sequence[Path] = ()) -> GitFacts:
    """The checkout's commit, branch and dirtiness; empty when git or the repository is absent.

    Changes under `ignore` do not make the tree dirty: re-saving baselines rewrites the baseline
    files, and the second save of a series must still count as the same, clean code.
    """

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=directory, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return GitFacts()
    excluded = [
        f":(exclude){path.relative_to(directory)}"
        for path in ignore
        if path.resolve().is_relative_to(directory.resolve()) and path != directory
    ]
    status = git("status", "--porcelain", "--untracked-files=no", "--", ":/", *excluded)
    return GitFacts(
        commit=commit,
        branch=git("rev-parse", "--abbrev-ref", "HEAD") or "",
        dirty=status is None or bool(status),  # unknown counts as dirty: never combine on it
        commit_time=git("show", "-s", "--format=%cI", "HEAD") or "",
    )


class BenchSession:
    """Per-process state of a gpuperf session (one per pytest process, xdist workers too)."""

    def __init__(
        self,
        settings: Settings,
        *,
        rootdir: Path,
        worker: int | None = None,
        opener: Callable[..., Backend] = open_backend,
    ) -> None:
        self.settings = settings
        self.rootdir = rootdir
        self.worker = worker
        self._opener = opener
        self._device: OpenDevice | None = None
        self._failure: GpuPerfError | None = None
        self._modules: dict[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]], Module] = {}
        self._store: Any = None
        self._git: GitFacts | None = None

    # -- the device ----------------------------------------------------------------------
    @property
    def opened(self) -> bool:
        return self._device is not None or self._failure is not None

    def device(self) -> OpenDevice:
        """The device, opened on first use; the same error again if that failed.

        Backends are tried in the order of --gpuperf-backend. `DeviceUnavailable` lists every
        attempt; any other error (a device key that does not fit, say) is a setup error.
        """
        if self._device is not None:
            return self._device
        if self._failure is not None:
            raise self._failure
        try:
            self._device = self._open()
        except GpuPerfError as failure:
            self._failure = failure
            raise
        return self._device

    def _open(self) -> OpenDevice:
        attempts: list[Attempt] = []
        for name in self.settings.backends:
            index = gpu_index_for(self.settings, _device_count(name), self.worker)
            options: dict[str, Any] = {}
            if name == "sim":
                options["device"] = self.settings.device_key or DEFAULT_SIM_DEVICE
            try:
                backend = self._opener(name, index, **options)
            except DeviceUnavailable as unavailable:
                attempts.extend(unavailable.attempts or (Attempt(name, str(unavailable)),))
                continue
            except ImportError as missing:
                attempts.append(Attempt(name, f"backend module did not import ({missing})"))
                continue
            try:
                match = match_device(backend.info, key=self.settings.device_key)
            except GpuPerfError:
                backend.close()
                raise
            return OpenDevice(backend, match, GpuLock(backend.info), tuple(attempts))
        hint = ""
        if "sim" not in self.settings.backends:
            hint = "Add sim to --gpuperf-backend (e.g. hip,cuda,sim) to run on the simulated device"
        raise DeviceUnavailable(attempts, hint=hint)

    def module(
        self, path: Path, options: tuple[str, ...], defines: Mapping[str, str | int]
    ) -> Module:
        """The compiled module for (file, options, defines), compiled once per session."""
        key = (str(path), options, tuple(sorted((k, str(v)) for k, v in defines.items())))
        if key not in self._modules:
            backend = self.device().backend
            self._modules[key] = backend.compile(path, options=options, defines=dict(defines))
        return self._modules[key]

    def close(self) -> None:
        if self._device is not None:
            from pytest_gpuperf import measure

            backend = self._device.backend
            try:
                measure.release(backend)
            finally:
                backend.close()
            self._device = None
        self._modules.clear()

    # -- baselines -----------------------------------------------------------------------
    def baselines(self) -> Any:
        """The BaselineStore of --gpuperf-baseline-dir (imported only when measuring)."""
        if self._store is None:
            from pytest_gpuperf.baseline import BaselineStore

            self._store = BaselineStore(self.settings.baseline_dir)
        return self._store

    def check_baseline_files(self) -> None:
        """Load every baseline file once, so a broken one stops the session up front with its
        file:line instead of failing each test (BaselineError)."""
        store = self.baselines()
        for key in store.device_keys():
            store.load(key)

    def git(self) -> GitFacts:
        if self._git is None:
            self._git = git_facts(self.rootdir, ignore=[self.settings.baseline_dir])
        return self._git

    def update_command(self, *targets: str) -> str:
        """The exact command that re-records these tests' baselines with these settings."""
        parts = ["pytest", "--gpuperf", "--gpuperf-save", *self.settings.command_options()]
        if self.settings.baseline_dir != self.rootdir / "baselines":
            parts.append(
                f"--gpuperf-baseline-dir={_relative(self.settings.baseline_dir, self.rootdir)}"
            )
        return " ".join([*parts, *(shlex.quote(target) for target in targets)])

    def missing_baselines(self, rows: Sequence[Any]) -> str | None:
        """One summary line for the measurements that had no baseline on their device (each
        test's own note would repeat the same advice for every row)."""
        missing = [
            row
            for row in rows
            if row.verdict.baseline_status in (NO_BASELINE, OTHER_DEVICE)
            and row.verdict.status != FAIL
        ]
        if not missing or self.settings.save:
            return None
        devices = ", ".join(sorted({row.measurement.device_key for row in missing}))
        files = list(dict.fromkeys(row.test_id.split("::")[0] for row in missing))
        targets = files if len(files) <= 4 else [_common_dir(files)]
        return (
            f"{len(missing)} of {len(rows)} measurements have no baseline for {devices} "
            f"(reported, not failed; --gpuperf-strict fails them); record them with: "
            f"{self.update_command(*targets)}"
        )

    # -- verdicts ------------------------------------------------------------------------
    def judge(self, test: TestSettings, measurements: Sequence[Measurement]) -> Judgement:
        """Gate each measurement on its floor and its baseline; under --gpuperf-save, record
        the ones whose floor check passed (one merge per test, safe across xdist workers)."""
        store = self.baselines()
        command = self.update_command(test.test_id)
        judged: list[tuple[Measurement, Verdict]] = []
        to_save = []
        for measurement in measurements:
            verdict = self._decide(store, test, measurement, command)
            if self.settings.save:
                verdict, entry = self._save_outcome(store, test.test_id, measurement, verdict)
                if entry is not None:
                    to_save.append(entry)
            judged.append((measurement, verdict))
        saved_to = None
        if to_save:
            saved_to = store.save(to_save[0].device_key, [e.entry for e in to_save])
            judged = [
                (m, _with_note(v, f"saved as the baseline in {_relative(saved_to, self.rootdir)}"))
                if any(e.entry.name == m.name for e in to_save)
                else (m, v)
                for m, v in judged
            ]
        from pytest_gpuperf.report import junit_properties

        properties: list[tuple[str, str]] = []
        for measurement, verdict in judged:
            prefix = "gpuperf" if len(judged) == 1 else f"gpuperf.{measurement.name}"
            properties += junit_properties(measurement, verdict, prefix=prefix)
        return Judgement(
            verdicts=tuple(judged),
            failures=tuple(v.reason for _, v in judged if v.status == FAIL),
            warnings=tuple(v.reason for _, v in judged if v.status == MARGINAL),
            properties=tuple(properties),
            saved_to=saved_to,
        )

    def _decide(
        self, store: Any, test: TestSettings, measurement: Measurement, command: str
    ) -> Verdict:
        keys = baseline_keys(measurement)
        reference = next(
            (
                ref
                for key in keys
                if (ref := store.lookup(key, test.test_id, measurement.name)) is not None
            ),
            None,
        )
        elsewhere: list[str] = []
        if reference is None:
            elsewhere = [
                key for key in store.devices_with(test.test_id, measurement.name) if key not in keys
            ]
        verdict = gate.decide(
            measurement,
            floor=test.floor,
            baseline=reference,
            baseline_status=OTHER_DEVICE if elsewhere else NO_BASELINE,
            tolerance=test.tolerance,
            strict_baseline=test.strict,
            update_command=command,
        )
        if reference is None and verdict.status != FAIL:
            verdict = _without_record_note(verdict, command)  # summarised once per session
        if elsewhere:
            verdict = _with_note(
                verdict,
                f"baselines for this measurement exist for: {', '.join(elsewhere)} "
                f"(none for {measurement.device_key})",
            )
        return verdict

    def _save_outcome(
        self, store: Any, test_id: str, measurement: Measurement, verdict: Verdict
    ) -> tuple[Verdict, _PendingSave | None]:
        """The verdict under --gpuperf-save and the entry to write, if the floor allows it.

        Saving re-records the baseline, so a baseline regression (or a missing baseline under
        --gpuperf-strict) does not fail the test; a floor failure does and saves nothing."""
        if verdict.floor_status == FAIL:
            return _with_note(verdict, "not saved: the floor check failed"), None
        from pytest_gpuperf.baseline import BaselineEntry, Provenance

        previous = store.load(baseline_keys(measurement)[0]).get(test_id, measurement.name)
        spread, spread_note = self._run_spread(measurement, previous)
        info = self.device().info if self._device is not None else None
        provenance = Provenance(
            commit=self.git().stamp,
            runtime_version=info.runtime_version if info else "",
            driver_version=info.driver_version if info else "",
            note=spread_note,
        )
        entry = BaselineEntry.from_measurement(measurement, test_id, spread, provenance)
        # "no baseline ...; record one with: <command>" is moot: this run records it.
        verdict = _without_record_note(verdict, self.update_command(test_id))
        if previous is not None:
            change = measurement.efficiency / previous.efficiency - 1.0
            verdict = _with_note(
                verdict,
                f"re-recorded by --gpuperf-save: was {previous.efficiency:.2%}, now "
                f"{measurement.efficiency:.2%} ({change:+.1%})",
            )
        if verdict.status == FAIL:  # a regression or a missing baseline: this run records it
            verdict = replace(verdict, status=PASS)
        return verdict, _PendingSave(entry, baseline_keys(measurement)[0])

    def _run_spread(self, measurement: Measurement, previous: Any) -> tuple[float, str]:
        """The run-to-run spread to record: the backend's default, widened by what repeated
        saves at the same clean commit observed (same code, so the difference is noise)."""
        default = default_run_spread(measurement.backend, measurement.time_s, measurement.cache)
        if measurement.simulated and self._device is not None:
            configured = getattr(
                getattr(self._device.backend, "settings", None), "run_spread", None
            )
            default = float(configured) if configured is not None else default
        commit = self.git()
        same_code = (
            previous is not None
            and previous.source == "measured"
            and previous.cache == measurement.cache
            and commit.commit
            and not commit.dirty
            and previous.provenance.commit == commit.stamp
        )
        if not same_code:
            relative = DEFAULT_RUN_SPREAD.get(measurement.backend, 0.07)
            if measurement.simulated or default == relative:
                return default, f"run_spread: {measurement.backend} default {default:.1%}"
            return default, (
                f"run_spread: {measurement.backend} default {relative:.1%} with "
                f"{LAUNCH_JITTER_S * 1e6:.1f} us of launch jitter at "
                f"{measurement.time_s * 1e6:.3g} us: {default:.1%}"
            )
        observed = abs(measurement.efficiency / previous.efficiency - 1.0)
        spread = max(default, previous.run_spread, observed)
        return spread, (
            f"run_spread: max of the {measurement.backend} default {default:.1%}, the previous "
            f"save's {previous.run_spread:.1%} and the {observed:.1%} seen between saves at "
            "this commit"
        )


def default_run_spread(backend: str, time_s: float, cache: str = "cold") -> float:
    """The run-to-run spread (a +-range at ~95%) a first save records: the backend's figure,
    combined with LAUNCH_JITTER_S for real GPUs where every timed launch starts on a device
    that has just finished a flush (cold) or other buffers (rotate); it dominates for kernels
    of a few us. Hot launches follow each other with no ramp-up of their own."""
    relative = DEFAULT_RUN_SPREAD.get(backend, 0.07)
    if backend == "sim" or cache == "hot" or time_s <= 0:
        return relative
    return round(math.hypot(relative, 1.96 * LAUNCH_JITTER_S / time_s), 4)


SIMULATED_SUFFIX = "-sim"


def baseline_keys(measurement: Measurement) -> tuple[str, ...]:
    """The baseline files a measurement is judged against, first the one it is saved to.

    A simulated device saves to `<key>-sim.toml` and never into the real device's file, so a
    save on a machine without a GPU cannot replace what a real MI300X measured; when it has
    no `-sim` entry it is judged against the real device's (the reported seed figures on the
    simulated MI300X). A real device reads and writes only its own file."""
    if measurement.simulated:
        return (measurement.device_key + SIMULATED_SUFFIX, measurement.device_key)
    return (measurement.device_key,)


@dataclass(frozen=True)
class _PendingSave:
    entry: Any  # baseline.BaselineEntry
    device_key: str


def _with_note(verdict: Verdict, note: str) -> Verdict:
    return replace(verdict, notes=(*verdict.notes, note))


def _without_record_note(verdict: Verdict, command: str) -> Verdict:
    notes = tuple(n for n in verdict.notes if not n.endswith(f"record one with: {command}"))
    return replace(verdict, notes=notes)


def _common_dir(files: Sequence[str]) -> str:
    return os.path.commonpath([os.path.dirname(f) or "." for f in files]) or "."


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def _device_count(backend_name: str) -> int | None:
    """How many devices the backend sees, when its module can tell without opening one
    (used to spread pytest-xdist workers over GPUs); None when unknown."""
    try:
        module = importlib.import_module(BACKENDS[backend_name])
    except ImportError:
        return None
    count = getattr(module, "device_count", None)
    if not callable(count):
        return None
    try:
        value = count()
    except Exception:  # a missing runtime is reported when the device is opened
        return None
    return value if isinstance(value, int) and value > 0 else None


# -- rows across processes (pytest-xdist sends TestReport attributes as plain data) ----------


def row_to_wire(test_id: str, measurement: Measurement, verdict: Verdict) -> dict[str, Any]:
    """A JSON/execnet-serialisable form of one report row."""
    return {"test_id": test_id, "measurement": _plain(measurement), "verdict": _plain(verdict)}


def row_from_wire(data: Mapping[str, Any]) -> Any:
    """The report.Row a `row_to_wire` dict came from."""
    from pytest_gpuperf.report import Row
    from pytest_gpuperf.results import BaselineRef, ClockReport
    from pytest_gpuperf.runtime.base import KernelResources

    m = dict(data["measurement"])
    m["time_ci_s"] = tuple(m["time_ci_s"])
    m["samples_s"] = tuple(m["samples_s"])
    for key in ("grid", "block"):
        if m.get(key) is not None:
            m[key] = tuple(m[key])
    if m.get("clocks") is not None:
        clocks = dict(m["clocks"])
        clocks["throttle_reasons"] = tuple(clocks.get("throttle_reasons", ()))
        m["clocks"] = ClockReport(**clocks)
    if m.get("resources") is not None:
        m["resources"] = KernelResources(**m["resources"])
    v = dict(data["verdict"])
    v["notes"] = tuple(v.get("notes", ()))
    if v.get("baseline") is not None:
        base = dict(v["baseline"])
        base["efficiency_ci"] = tuple(base["efficiency_ci"])
        v["baseline"] = BaselineRef(**base)
    return Row(str(data["test_id"]), Measurement(**m), Verdict(**v))


def _plain(value: Any) -> Any:
    """Dataclasses, tuples and NumPy scalars as dicts, lists and Python numbers."""
    if hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    item = getattr(value, "item", None)
    return _plain(item()) if callable(item) else str(value)


def device_to_wire(device: OpenDevice) -> dict[str, Any]:
    return {"info": _plain(device.info), "lines": device.describe(), "simulated": device.simulated}


def device_info_from_wire(data: Mapping[str, Any]) -> DeviceInfo:
    return DeviceInfo(**data["info"])


__all__ = [
    "DEFAULT_RUN_SPREAD",
    "BenchSession",
    "GitFacts",
    "Judgement",
    "OpenDevice",
    "default_run_spread",
    "device_info_from_wire",
    "device_to_wire",
    "row_from_wire",
    "row_to_wire",
]
