"""The explain pass's hooks: when a test is profiled, how its re-run is invoked, and what its
lines do to the test (a bytes-check warning fails it under --gpuperf-strict).

A run where nothing fails pays nothing: without --gpuperf-explain or --gpuperf-check-bytes
only a confirmed regression (a failed A/B or stored check, which the gate measured twice) on a
real GPU is profiled. What the profile says never changes a verdict.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.plugin.state import state_of

if TYPE_CHECKING:
    from pytest_gpuperf.session.bench_session import Judgement

EXPLAINED: pytest.StashKey[dict[int, dict[str, Any]]] = pytest.StashKey()
# A problem that holds for the whole run (no profiler, counters refused): later tests are not
# re-run under a profiler that already said no.
LASTING: pytest.StashKey[Any] = pytest.StashKey()
_REGRESSIONS = {"ab", "regression"}
# --gpuperf-check-bytes alone on the simulated device: what was asked, and why not (said once)
SIM_BYTES_LINE = "declared bytes not checked: the simulated device has no counters"
# Report files and the GPU probe are the parent's: the child writes and probes nothing.
_CHILD_INI = ("gpuperf_json=", "gpuperf_markdown=", "gpuperf_benchmark_json=")
# The report options a child could inherit through `addopts` or PYTEST_ADDOPTS (which the ini
# overrides above do not reach): by option dest, the flag the child is given a private path
# with. Only those the run registered are passed (the child loads the same plugins).
_CHILD_OUTPUTS = (
    ("gpuperf_json", "--gpuperf-json"),
    ("gpuperf_markdown", "--gpuperf-markdown"),
    ("gpuperf_benchmark_json", "--gpuperf-benchmark-json"),
    ("xmlpath", "--junitxml"),
    ("htmlpath", "--html"),
    ("reportlog", "--report-log"),
    ("json_report_file", "--json-report-file"),
)


def explain_test(item: pytest.Item, judgement: Judgement) -> dict[int, dict[str, Any]]:
    """Each measurement's `explain` object, by position ({} when the test is not profiled)."""
    from pytest_gpuperf.explain.counters.measured import explanation
    from pytest_gpuperf.explain.counters.profile import ProfileRequest, run_profile
    from pytest_gpuperf.record.verdict import FAIL
    from pytest_gpuperf.session.profile_child import child_plan

    state = state_of(item.config)
    settings = state.settings
    verdicts = judgement.verdicts
    asked = settings.explain or settings.check_bytes
    confirmed = any(v.status == FAIL and _REGRESSIONS & set(v.failed_checks) for _, v in verdicts)
    if child_plan() is not None or not verdicts or not (asked or confirmed):
        return {}
    try:
        device = state.session.device()
    except GpuPerfError:
        return {}
    if device.simulated and not asked:
        return {}  # the simulated device has no counters: nothing to say unless asked
    against = "" if settings.compare_ref else saved_commit(verdicts, Path(item.config.rootpath))
    spec = device.match.spec
    request = ProfileRequest(
        nodeid=item.nodeid,
        pytest_args=tuple(_child_args(item.config, device.info.index, against)),
        cwd=Path(item.config.rootpath),
        backend=profiler_backend(device.info),
        hot=all(m.cache == "hot" for m, _ in verdicts),
        timeout_s=settings.explain_timeout_s,
        output_options=_output_options(item.config),
        # a measurement that declared its FLOPs: the pipes' utilisation and the FLOPs counted
        compute=any(m.work is not None for m, _ in verdicts),
        compute_units=int(device.info.compute_units),
        # MI300-class parts have an XCD per 4 MB of L2: rocprofv3's GRBM counts each one
        xcds=max(1, spec.l2_bytes // 2**22) if spec.arch == "gfx942" else 1,
    )
    profiled = item.config.stash.get(LASTING, None) or run_profile(request)
    if device.simulated and not settings.explain:  # only the declarations were asked about
        profiled = replace(profiled, problem=SIM_BYTES_LINE)
    if profiled.lasting:
        item.config.stash[LASTING] = profiled
    l2_bytes = int(device.info.l2_bytes)
    return {
        position: explanation(
            profiled,
            position,
            check_bytes=True,
            l2_bytes=l2_bytes,
            stored_commit=against,
            work=measurement.work,
        )
        for position, (measurement, _) in enumerate(verdicts)
    }


def saved_commit(verdicts: Any, rootdir: Path) -> str:
    """The commit of the latest save of the first baseline a measurement of the test failed
    against (a stored regression), when git can resolve it here: the explain pass's child
    then builds the kernel at that commit too and profiles it beside head's, so the failure
    names head-vs-base bytes as an A/B's does. "" when none failed so, or the commit is not in
    this clone (a shallow CI checkout): head's counters alone, as before."""
    from pytest_gpuperf.record.verdict import FAIL
    from pytest_gpuperf.session.base_tree import resolve_ref

    for _, verdict in verdicts:
        ref = verdict.baseline.baseline
        if verdict.status != FAIL or "regression" not in verdict.failed_checks or ref is None:
            continue
        if not ref.commit:
            continue
        try:
            return resolve_ref(ref.commit, rootdir)[1]
        except GpuPerfError:
            return ""
    return ""


def profiler_backend(info: Any) -> str:
    """Whose profiler explains this device's launches: "cuda" (ncu), "hip" (rocprofv3) or
    "sim" (none: the simulated device counts nothing)."""
    return str(info.backend)


def _child_args(config: pytest.Config, gpu_index: int, against: str = "") -> list[str]:
    """The re-run's pytest options: the same kernels on the same GPU, nothing written; the
    base built at the run's --gpuperf-compare REF, or at `against` (saved_commit)."""
    settings = state_of(config).settings
    args = ["-q", "-p", "no:cacheprovider", *_plugins(config.invocation_params.args)]
    args += ["--gpuperf", *settings.command_options()]
    args += [f"--gpuperf-gpu={gpu_index}", "--gpuperf-gpu-margin=0"]
    if settings.compare_ref or against:
        args.append(f"--gpuperf-compare={settings.compare_ref or against}")
    if settings.head_ref:
        args.append(f"--gpuperf-head={settings.head_ref}")
    for override in _CHILD_INI:
        args += ["-o", override]
    if config.inipath is not None:
        args += ["-c", str(config.inipath)]
    args.append(f"--rootdir={config.rootpath}")
    if config.pluginmanager.hasplugin("xdist"):
        args += ["-n", "0"]
    return args


def _output_options(config: pytest.Config) -> tuple[str, ...]:
    """The report flags this run knows, each of which the child gets a private path for: the
    run's own report files are the parent's, whatever `addopts` says."""
    return tuple(flag for dest, flag in _CHILD_OUTPUTS if hasattr(config.option, dest))


def _plugins(given: tuple[str, ...] | list[str]) -> list[str]:
    """The run's own `-p NAME` options (the plugin itself may be loaded that way)."""
    found = []
    for position, arg in enumerate(given):
        if arg == "-p" and position + 1 < len(given):
            found += ["-p", given[position + 1]]
        elif arg.startswith("-p") and len(arg) > 2 and not arg.startswith("--"):
            found += ["-p", arg[2:]]
    return found


def judgement_strict(item: pytest.Item) -> bool:
    """The test asked for strict gating (the gpuperf marker's strict=True)."""
    from pytest_gpuperf.plugin.state import BENCH

    bench = item.stash.get(BENCH, None)
    return bool(bench is not None and bench.test.strict)


def bytes_warnings(item: pytest.Item, explained: dict[int, dict[str, Any]]) -> list[str]:
    """The declaration checks that warn (declared bytes, declared FLOPs): each is a warning,
    and under --gpuperf-strict (or the test's strict=True) a failure of the test."""
    lines = []
    for explain in explained.values():
        for name in ("bytes_check", "flops_check"):
            check = explain.get(name) or {}
            if check.get("warns"):
                lines.append(f"gpuperf: {check['line']}")
    return lines


__all__ = ["EXPLAINED", "bytes_warnings", "explain_test", "judgement_strict", "saved_commit"]
