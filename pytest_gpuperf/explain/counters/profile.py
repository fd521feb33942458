"""The explain pass: one launch of head and one of base, profiled in a child process.

The parent (the pytest run that judged the test) re-runs the test's node id under the
vendor's profiler with `PLAN_ENV` set. In that child the `gpu_bench` fixture measures nothing:
each call launches head once and base once inside a profiler range (`profile_launch`), with
the test's own inputs and cache mode, and appends what it launched to the plan file. The
parent then pairs the plan with the profiler's report, launch by launch. Everything that can
go wrong (no profiler, counters not permitted or held by another tool, a child that fails or
hangs) ends in one line, and the verdict, decided before, never depends on it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.explain.counters import ncu, rocprof
from pytest_gpuperf.explain.counters.traffic import Traffic
from pytest_gpuperf.record.json_text import loads_line
from pytest_gpuperf.session.profile_child import BASE, CALLABLE, HEAD, MARKER, MARKER_SIDE
from pytest_gpuperf.session.profile_plan import PLAN_ENV, make_plan

# Variables of the parent that must not reach the child: an xdist worker's identity would make
# the child a worker, and a job summary is the parent's to write.
_PARENT_ONLY = (
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_CURRENT_TEST",
    "GITHUB_STEP_SUMMARY",
)
# What of the child's output is read: its last lines say why it failed, and a profiler can
# print gigabytes (1.5 GB of ncu output once made a 4.5 GB parent and, under a memory limit, a
# MemoryError in a passing test). The output goes to a file; only its tail is read.
OUTPUT_TAIL_BYTES = 64 * 1024
# The profiler's report of one test's launches is a few kilobytes a launch; past this it is
# not read at all (one line says so).
REPORT_MAX_BYTES = 64 * 1024 * 1024
# What a callable launched, as one Traffic's kernel name: the launches' names joined
LAUNCH_JOINER = " + "
NOTHING_LAUNCHED = "(nothing launched)"


# -- the parent: running the child ----------------------------------------------------


@dataclass(frozen=True)
class PlannedLaunch:
    """One launch the child profiled: which measurement (its position among the test's
    gpu_bench calls), which side, and what the check of its bytes needs."""

    position: int
    name: str
    side: str
    kernel: str
    cache: str
    declared_bytes: int
    uniform_args: tuple[int, ...] = ()
    uniform_arg_bytes: tuple[int, ...] = ()

    @classmethod
    def from_plain(cls, data: Mapping[str, Any]) -> PlannedLaunch:
        return cls(
            position=int(data["position"]),
            name=str(data["name"]),
            side=str(data["side"]),
            kernel=str(data["kernel"]),
            cache=str(data["cache"]),
            declared_bytes=int(data["declared_bytes"]),
            uniform_args=tuple(int(i) for i in data.get("uniform_args", ())),
            uniform_arg_bytes=tuple(int(n) for n in data.get("uniform_arg_bytes", ())),
        )


@dataclass(frozen=True)
class Profiled:
    """What the child's profile gave: each planned launch with its counters (in order), or
    `problem`, the one line that says why there are none and what fixes it."""

    tool: str
    cache_control: str
    cost_s: float
    launches: tuple[tuple[PlannedLaunch, Traffic], ...] = ()
    problem: str = ""
    lasting: bool = False  # the problem holds for the whole run (no profiler, refused)
    output_tail: tuple[str, ...] = field(default=(), compare=False)
    # compute counters this profiler does not know on this GPU: not asked again in this
    # process, each said in one line; the other counters are still reported
    unknown_metrics: tuple[str, ...] = ()

    def of(self, position: int, side: str) -> Traffic | None:
        for planned, traffic in self.launches:
            if planned.position == position and planned.side == side:
                return traffic
        return None

    def planned(self, position: int) -> PlannedLaunch | None:
        return next((p for p, _ in self.launches if p.position == position), None)


@dataclass(frozen=True)
class ProfileRequest:
    """How to re-run one test under a profiler: its node id, the pytest options that build
    and launch it the same way, where to run, the backend ("cuda" or "hip"), the cache
    mode its measurements time, and how long the child may take. `output_options`: the
    report options the child must not write the run's files with (`--junitxml`,
    `--gpuperf-json`: they may come from `addopts` or PYTEST_ADDOPTS); each is given a path in
    the pass's private folder, after the inherited ones, so it wins."""

    nodeid: str
    pytest_args: tuple[str, ...]
    cwd: Path
    backend: str
    hot: bool
    timeout_s: float
    output_options: tuple[str, ...] = ()
    compute: bool = False  # a measurement declared its FLOPs: ask for the compute counters
    compute_units: int = 0  # the device's CUs and XCDs: rocprofv3's MFMA utilisation
    xcds: int = 1


def missing_profiler_line(backend: str) -> str:
    if backend == "hip":
        return (
            "not explained: rocprofv3 was not found (on PATH or /opt/rocm/bin): install "
            "ROCm's rocprofiler-sdk to explain regressions with the GPU's counters"
        )
    return (
        "not explained: Nsight Compute's ncu was not found (GPUPERF_NCU, PATH, "
        f"{ncu.NCU_FALLBACK}): install Nsight Compute (or the CUDA toolkit), or set "
        "GPUPERF_NCU=/path/to/ncu, to explain regressions with the GPU's counters"
    )


# The compute counters ncu refused in this process (ncu.refused_metrics): a card knows its
# tensor-pipe metrics or it does not, so later tests do not ask again.
_UNKNOWN_METRICS: set[str] = set()
MAX_REFUSED_RETRIES = 4


def run_profile(request: ProfileRequest) -> Profiled:
    """Profile the test in a child process; never raises for what the child or the profiler
    did (the problem is the result's one line). A compute counter ncu does not know on this
    GPU is dropped: when its refusal failed the profile, the test is profiled once more
    without it, and every refused counter is one line of the result (unknown_metrics)."""
    profiled = _profile_once(request)
    unknown, cost_s = profiled.unknown_metrics, profiled.cost_s
    # an ncu that names one refused metric at a time needs a run for each, at most one each
    for _ in range(MAX_REFUSED_RETRIES):
        if not profiled.unknown_metrics or not profiled.problem or profiled.lasting:
            break
        profiled = _profile_once(request)
        unknown = tuple(dict.fromkeys((*unknown, *profiled.unknown_metrics)))
        cost_s += profiled.cost_s
    return replace(profiled, cost_s=cost_s, unknown_metrics=unknown)


def _profile_once(request: ProfileRequest) -> Profiled:
    """One child run under the profiler (see run_profile)."""
    began = time.monotonic()
    cache_control = "none" if request.hot else "all"
    tool_path = ncu.find_ncu() if request.backend == "cuda" else rocprof.find_rocprofv3()
    tool = "ncu" if request.backend == "cuda" else "rocprofv3"
    if request.backend not in ("cuda", "hip"):
        line = "not explained: the simulated device has no counters"
        return Profiled(tool, cache_control, 0.0, problem=line, lasting=True)
    if tool_path is None:
        line = missing_profiler_line(request.backend)
        return Profiled(tool, cache_control, 0.0, problem=line, lasting=True)
    with tempfile.TemporaryDirectory(prefix="gpuperf-explain-") as folder:
        work = Path(folder)
        plan, proof = make_plan(work)  # the child's proof that this parent started it
        log = work / "ncu.csv"
        asked = ncu.metrics_for(request.compute, frozenset(_UNKNOWN_METRICS))
        if request.backend == "cuda":
            command = ncu.ncu_command(
                tool_path,
                cache_control=cache_control,
                log_file=log,
                compute=request.compute,
                unknown=frozenset(_UNKNOWN_METRICS),
            )
        else:
            command = rocprof.rocprof_command(
                tool_path, output_dir=work / "rocprof", compute=request.compute
            )
        private = [
            f"{option}={work / f'child-output-{number}'}"
            for number, option in enumerate(request.output_options)
        ]
        command += [
            sys.executable, "-m", "pytest", request.nodeid, *request.pytest_args, *private
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k not in _PARENT_ONLY}
        env.update(proof)
        returncode, output, timed_out = run_child(
            command, env, request.cwd, request.timeout_s, output_file=work / "output.txt"
        )
        cost_s = time.monotonic() - began
        tail = tuple(output.strip().splitlines()[-15:])
        unknown: tuple[str, ...] = ()

        def failed(line: str) -> Profiled:
            return Profiled(
                tool, cache_control, cost_s, problem=line, output_tail=tail, unknown_metrics=unknown
            )

        try:
            report = _read_text(log) if request.backend == "cuda" else ""
        except _TooLarge as large:
            return failed(f"not explained: {large}")
        if request.backend == "cuda" and request.compute:
            unknown = ncu.refused_metrics(output + "\n" + report, asked)
            _UNKNOWN_METRICS.update(unknown)
        refused = ncu.refusal(output + "\n" + report)
        if refused:
            line = f"not explained: {refused}"
            return Profiled(tool, cache_control, cost_s, problem=line, lasting=True)
        if timed_out:
            return failed(
                f"not explained: the profiled re-run of {request.nodeid} took longer than "
                f"{request.timeout_s:g} s and was stopped (raise --gpuperf-explain-timeout)"
            )
        if returncode != 0:
            last = tail[-1] if tail else "no output"
            return failed(
                f"not explained: the profiled re-run of {request.nodeid} failed (exit "
                f"{returncode}): {last}"
            )
        try:
            planned = [
                PlannedLaunch.from_plain(loads_line(line, str(plan), "a planned launch"))
                for line in _read_text(plan, limit_bytes=REPORT_MAX_BYTES).splitlines()
                if line.strip()
            ]
            if not planned:
                return failed("not explained: the test made no gpu_bench call to profile")
            if request.backend == "cuda":
                every = [ncu.traffic_of(launch) for launch in ncu.read_ncu_csv(report)]
            else:
                files = rocprof.counter_files(work / "rocprof")
                texts = (_read_text(f) for f in files)
                every = rocprof.read_rocprof_csv(
                    texts, compute_units=request.compute_units, xcds=request.xcds
                )
                every = _by_name(every, planned)
        except _TooLarge as large:
            return failed(f"not explained: {large}")
        except (GpuPerfError, ValueError, KeyError) as bad:
            return failed(f"not explained: the profile could not be read: {bad}")
        counted = _aligned(every, planned)
        if counted is None:
            names = ", ".join(t.kernel for t in every) or "none"
            return failed(
                f"not explained: the profile holds {len(every)} launch(es) ({names}) where "
                f"the test made {len(planned)}"
            )
        launches = zip(planned, counted, strict=True)
        return Profiled(
            tool,
            cache_control,
            time.monotonic() - began,
            launches=tuple((p, t) for p, t in launches if p.side != MARKER_SIDE),
            output_tail=tail,
            unknown_metrics=unknown,
        )


def _aligned(every: list[Traffic], planned: list[PlannedLaunch]) -> list[Traffic] | None:
    """One Traffic per planned launch (None: the profile does not fit the plan). A kernel
    launch is one profiled launch. A gpu_bench.run (a callable) is whatever it launched,
    summed: the launches up to the marker kernel the child launched after it (session/
    profile_child.py). A callable planned without a marker takes the launches left over, when
    it is the only such call."""
    unmarked = [
        i for i, p in enumerate(planned) if p.kernel == CALLABLE and not _marked(planned, i)
    ]
    if len(unmarked) > 1:
        return None
    found: list[Traffic] = []
    at = 0
    for index, entry in enumerate(planned):
        if entry.kernel != CALLABLE:
            if at >= len(every) or not _same_kernel(every[at].kernel, entry.kernel):
                return None
            found.append(every[at])
            at += 1
            continue
        if _marked(planned, index):
            ends = (j for j in range(at, len(every)) if _same_kernel(every[j].kernel, MARKER))
            end = next(ends, None)
        else:  # the planned launches after it are kernels, one profiled launch each
            end = len(every) - (len(planned) - index - 1)
        if end is None or end < at:
            return None
        found.append(summed(every[at:end]))
        at = end
    return found if at == len(every) else None


def _marked(planned: list[PlannedLaunch], index: int) -> bool:
    """Whether the child launched its marker kernel right after planned launch `index`."""
    return index + 1 < len(planned) and planned[index + 1].side == MARKER_SIDE


def summed(launches: list[Traffic]) -> Traffic:
    """Several launches as one piece of work (what a callable launched): bytes, instructions
    and time add up; registers and shared memory are the most any launch used; occupancy is
    not a sum."""

    def total(name: str) -> float | None:
        values = [getattr(t, name) for t in launches]
        return None if not values or None in values else float(sum(values))

    registers = [t.registers_per_thread for t in launches if t.registers_per_thread is not None]
    shared = [t.shared_bytes_per_block for t in launches if t.shared_bytes_per_block is not None]
    pipes = [t for t in launches if t.tensor_pipe is not None and t.time_s]
    kinds = [t.tensor_pipe_kind for t in pipes if t.tensor_pipe_kind]
    return Traffic(
        tensor_pipe=_time_weighted(launches, "tensor_pipe"),
        tensor_pipe_kind=max(set(kinds), key=kinds.count) if kinds else "",
        fma_pipe=_time_weighted(launches, "fma_pipe"),
        flops=total("flops"),
        tensor_flops=total("tensor_flops"),
        kernel=LAUNCH_JOINER.join(t.kernel for t in launches) or NOTHING_LAUNCHED,
        dram_read_bytes=total("dram_read_bytes"),
        dram_write_bytes=total("dram_write_bytes"),
        l2_bytes=total("l2_bytes"),
        registers_per_thread=max(registers) if registers else None,
        shared_bytes_per_block=max(shared) if shared else None,
        instructions=total("instructions"),
        local_bytes=total("local_bytes"),
        time_s=total("time_s"),
    )


def _time_weighted(launches: list[Traffic], name: str) -> float | None:
    """A utilisation over several launches: each launch's, weighted by its time (None when a
    launch lacks either)."""
    pairs: list[tuple[float, float]] = []
    for launch in launches:
        value, time_s = getattr(launch, name), launch.time_s
        if value is None or not time_s:
            return None
        pairs.append((float(value), float(time_s)))
    if not pairs:
        return None
    return sum(value * time_s for value, time_s in pairs) / sum(time_s for _, time_s in pairs)


def _same_kernel(reported: str, launched: str) -> bool:
    """ncu and rocprofv3 may add the parameter list (a C++ kernel's demangled name)."""
    return reported == launched or reported.split("(")[0].strip().endswith(launched)


def _by_name(every: list[Traffic], planned: list[PlannedLaunch]) -> list[Traffic]:
    """rocprofv3 counts every dispatch (it has no range here): the planned launches are the
    last dispatches of their kernels' names, in plan order, and a callable's are the
    dispatches between the marker the child launched before its range and the one after."""
    found: list[Traffic] = []
    remaining = list(every)
    for index in reversed(range(len(planned))):
        entry = planned[index]
        if entry.kernel == CALLABLE and _marked(planned, index):
            while remaining and not _same_kernel(remaining[-1].kernel, MARKER):
                found.append(remaining.pop())
            if remaining:
                remaining.pop()  # the marker that opened the side
            continue
        while remaining and not _same_kernel(remaining[-1].kernel, entry.kernel):
            remaining.pop()
        if remaining:
            found.append(remaining.pop())
    return list(reversed(found))


class _TooLarge(Exception):
    """A profiler's file past REPORT_MAX_BYTES: the message is the line that says so."""


def _read_text(path: Path, limit_bytes: int = REPORT_MAX_BYTES) -> str:
    """The file's text ("" when absent); past `limit_bytes` it is not read (_TooLarge)."""
    try:
        size = path.stat().st_size
        if size > limit_bytes:
            raise _TooLarge(
                f"the profiler's {path.name} holds {size / 1e6:.0f} MB, more than the "
                f"{limit_bytes / 1e6:.0f} MB read: profile fewer launches (a smaller -k)"
            )
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def output_tail(path: Path, limit_bytes: int = OUTPUT_TAIL_BYTES) -> str:
    """The last `limit_bytes` of a file, decoded (the first, partial line dropped)."""
    try:
        with path.open("rb") as stream:
            size = stream.seek(0, os.SEEK_END)
            stream.seek(max(0, size - limit_bytes))
            data = stream.read(limit_bytes)
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", "replace")
    if size > limit_bytes and "\n" in text:
        text = text.split("\n", 1)[1]
    return text


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_child(
    command: list[str],
    env: Mapping[str, str],
    cwd: Path,
    timeout_s: float,
    *,
    output_file: Path,
) -> tuple[int, str, bool]:
    """(exit status, the output's tail, timed out): the child in a session of its own, its
    output (stdout and stderr) into `output_file`, never a pipe. A pipe would make the wait
    end only at end of file, which a grandchild that keeps the pipe open (a profiler's
    helper that left the session) postpones past any timeout: 97 s for a 10 s timeout. So
    the wait is on the child's exit, bounded by `timeout_s`; at the timeout, and after a
    normal exit, its process group is killed, and only the output's tail is read."""
    try:
        with output_file.open("wb") as sink:
            child = subprocess.Popen(
                command,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as failure:
        return 127, f"{command[0]}: {failure.strerror or failure}", False
    timed_out = False
    try:
        child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    except BaseException:  # Ctrl-C or SIGTERM in the parent: stop the child too
        _kill_group(child.pid)
        child.wait()
        raise
    _kill_group(child.pid)  # the child's leftovers (or, at the timeout, the child itself)
    child.wait()
    return child.returncode, output_tail(output_file), timed_out


__all__ = [
    "BASE",
    "CALLABLE",
    "HEAD",
    "LAUNCH_JOINER",
    "NOTHING_LAUNCHED",
    "PLAN_ENV",
    "PlannedLaunch",
    "ProfileRequest",
    "Profiled",
    "output_tail",
    "run_child",
    "run_profile",
    "summed",
]
