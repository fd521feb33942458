"""What a run's report says about the run itself, beside its rows: the checkout, the command,
the devices and GPUs, the false-alarm budget, the faults, a shard's plan or the merge's verdict.

Filled by the pytest run (plugin/finish.py) or by the merge; read by every renderer (report/)
and written into the JSON report (record/json_report.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.runtime.info import DeviceInfo

# The plugin's version: here, beside the field that records it, so that the layers that write
# it (this one, the gate's saves) read it without importing the package's root, which stands
# above every layer; the root re-exports it as `pytest_gpuperf.__version__`, and
# pyproject.toml reads it from this line ([tool.hatch.version]).
VERSION = "0.2.0"


@dataclass(frozen=True)
class ReportMeta:
    """Facts about the run that the rows do not carry (all optional).

    `device` adds arch and runtime/driver versions to what the measurements already say.
    """

    device: DeviceInfo | None = None
    project: str = ""
    commit: str = ""
    commit_time: str = ""
    branch: str = ""
    dirty: bool = False
    created: str = ""  # ISO 8601 UTC; the time of rendering when empty
    command: str = ""  # the command line, so a reader can rerun it
    plugin_version: str = VERSION
    compare_ref: str = ""
    compare_commit: str = ""
    # The datasheet peak of each device key (a test may measure against its own peak_gbps).
    device_peaks: tuple[tuple[str, float], ...] = ()
    # The run's false-alarm budget (--gpuperf-suite-alarm) and the measuring tests sharing it
    # (0: not known, e.g. a report made outside a pytest run).
    suite_target: float = 0.0
    suite_checks: int = 0
    problems: tuple[str, ...] = ()  # what could not be done (a file not saved), one line each
    interrupted: bool = False  # Ctrl-C stopped the run: the rows are what was measured before
    # Each GPU the run used: backend, index, pci_bus_id, uuid, workers (pytest-xdist ids, or
    # "main"), lock_held_s / lock_waited_s / lock_holds summed over its workers.
    gpus: tuple[dict[str, Any], ...] = ()
    # The degraded-GPU probe (gpu_probe.ProbeReport as plain data), when it ran.
    probe: dict[str, Any] | None = None
    wall_s: float | None = None  # the session's wall time, beside the GPU-lock time
    # accept rules that named no test, trailers refused for want of a reason (gate/accept.py)
    accept_warnings: tuple[str, ...] = ()
    # --gpuperf-shard: this runner's part of the suite (shard.ShardPlan.to_json, plus how
    # pytest ended its tests); the merge's summary of all shards (merge/shards.py)
    shard: dict[str, Any] | None = None
    merge: dict[str, Any] | None = None
    # --gpuperf-head: the revision the kernels were built from instead of the work tree
    head_ref: str = ""
    head_commit: str = ""
    # Each test that used gpu_bench: test_id, outcome, kernel_files (the work tree's files it
    # loaded, relative to the rootdir), error (one line when gpuperf stopped it, e.g. a kernel
    # that does not compile): what `gpuperf bisect` reads.
    tests: tuple[dict[str, Any], ...] = ()
    rootdir: str = ""  # pytest's rootdir, which the tests' kernel_files are relative to
