"""Nsight Compute (`ncu`) as the profiler of an explain pass: the command line and its CSV.

`ncu --csv --page raw --print-units base` prints one row per profiled launch with a column
per metric and a row of units under the header; numbers in base units (bytes, nanoseconds,
percent). The child pytest process marks the launches to profile with cuProfilerStart/Stop
(`--profile-from-start off`), so the flush kernels of a cold measurement and the test's own
launches are not counted.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.explain.counters.traffic import Traffic

NCU_FALLBACK = Path("/usr/local/cuda/bin/ncu")
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
L2_BYTES = "lts__t_bytes.sum"
REGISTERS = "launch__registers_per_thread"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
INSTRUCTIONS = "smsp__inst_executed.sum"
LOCAL_LOAD = "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"
LOCAL_STORE = "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"
DURATION = "gpu__time_duration.sum"
# shared memory a block was given: what a kernel the plugin did not build (a torch extension's,
# CuPy's) declares, told by the launch itself
SHARED_STATIC = "launch__shared_mem_per_block_static"
SHARED_DYNAMIC = "launch__shared_mem_per_block_dynamic"
METRICS = (
    DRAM_READ,
    DRAM_WRITE,
    L2_BYTES,
    REGISTERS,
    OCCUPANCY,
    INSTRUCTIONS,
    LOCAL_LOAD,
    LOCAL_STORE,
    DURATION,
    SHARED_STATIC,
    SHARED_DYNAMIC,
)
# A compute-bound kernel's counters (asked only for a test that declared its FLOPs), named as
# Nsight Compute's Kernel Profiling Guide and `ncu --query-metrics` name them: the tensor
# pipe's utilisation for mma.sync (HMMA, Ampere and Hopper) and for wgmma (GMMA, Hopper
# only), the FP32 FMA pipe's (the path without tensor cores), the SASS floating-point
# instructions per thread (an FFMA is two FLOPs, as the roofline sections of Nsight Compute
# count it) and the tensor path's operations by source type (`sm__ops_path_tensor_*`: a
# bf16 1024^3 matmul counts 2 x 1024^3). A card or an ncu that does not know one of them
# drops it (profile.py: one line, the rest still reported).
TENSOR_PIPE_HMMA = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_PIPE_GMMA = "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
# any tensor instruction: what an ncu or a card without the two above still reports
TENSOR_PIPE_ANY = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
FMA_PIPE = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_FAMILIES = {TENSOR_PIPE_HMMA: "mma.sync (HMMA)", TENSOR_PIPE_GMMA: "wgmma (GMMA)"}
TENSOR_PIPES = (*TENSOR_FAMILIES, TENSOR_PIPE_ANY)
# SASS thread instructions and the FLOPs each counts for
SASS_FLOPS = {
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 2,
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": 2,
    "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum": 1,
}
TENSOR_OPS = (
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp16_dst_fp16.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp8.sum",
    "sm__ops_path_tensor_src_fp64.sum",
)
COMPUTE_METRICS = (*TENSOR_PIPES, FMA_PIPE, *SASS_FLOPS, *TENSOR_OPS)
ALL_METRICS = (*METRICS, *COMPUTE_METRICS)
# Base units as --print-units base writes them, to the unit the Traffic fields hold.
# Nsight Compute 2025.3 writes "ns" for gpu__time_duration and "%" for percentages.
_SCALE = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "s": 1.0}
_SCALE.update({"%": 0.01, "byte": 1.0, "byte/block": 1.0, "register/thread": 1.0})
_SCALE.update({"inst": 1.0, "": 1.0, "op": 1.0, "operation": 1.0})


class ProfileCsvError(GpuPerfError):
    """The profiler's output could not be read as the CSV it should be."""


def find_ncu() -> Path | None:
    """$GPUPERF_NCU, else `ncu` on PATH, else CUDA's default place (None: not installed)."""
    named = os.environ.get("GPUPERF_NCU")
    if named:
        return Path(named) if Path(named).is_file() else None
    found = shutil.which("ncu")
    if found:
        return Path(found)
    return NCU_FALLBACK if NCU_FALLBACK.is_file() else None


def ncu_command(
    ncu: Path,
    *,
    cache_control: str,
    log_file: Path,
    compute: bool = False,
    unknown: frozenset[str] = frozenset(),
) -> list[str]:
    """The profiler's part of the child's command line (the application follows it).

    `compute`: ask for the compute counters too (a test that declared its FLOPs), less the
    `unknown` ones this ncu refused on this card.

    `cache_control`: "all" flushes every cache before each profiled launch (and each of its
    replay passes): a cold launch, what cache="cold" and "rotate" time; "none" leaves the
    caches as the launch before left them (cache="hot"). Clocks are left alone (`--clock-
    control none`): the counts do not depend on them and the gate's times are not taken here.
    Only the application process is profiled, not the compilers it starts."""
    return [
        str(ncu),
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--metrics",
        ",".join(metrics_for(compute, unknown)),
        "--profile-from-start",
        "off",
        "--cache-control",
        cache_control,
        "--clock-control",
        "none",
        "--target-processes",
        "application-only",
        "--log-file",
        str(log_file),
    ]


def metrics_for(compute: bool, unknown: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The metrics asked for: the traffic's, and the compute ones not known to be refused."""
    if not compute:
        return METRICS
    return (*METRICS, *(m for m in COMPUTE_METRICS if m not in unknown))


def refused_metrics(output: str, asked: tuple[str, ...]) -> tuple[str, ...]:
    """The compute metrics ncu's output says it does not know ("==ERROR== Failed to find
    metric ...", or any error line naming one), in the order asked."""
    errors = [line for line in output.splitlines() if "==ERROR==" in line or "==WARNING==" in line]
    named = []
    for metric in asked:
        base = metric.split(".", 1)[0]
        if metric in COMPUTE_METRICS and any(base in line for line in errors):
            named.append(metric)
    return tuple(named)


def _number(text: str) -> float | None:
    text = text.strip()
    if not text or text.lower() == "n/a":
        return None
    try:  # the raw page writes thousands separators: "33,559,808"
        return float(text.replace(",", ""))
    except ValueError:
        return None


def read_ncu_csv(text: str) -> list[dict[str, float | str | None]]:
    """Each profiled launch of a `--csv --page raw --print-units base` report, in launch
    order: the metrics in base units scaled (bytes, seconds, fractions), plus "Kernel Name".
    Lines before the header (`==PROF==` progress, warnings) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ProfileCsvError('the ncu report has no CSV header (a line starting with "ID")')
    table = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, body = table[0], table[1:]
    units = [""] * len(header)
    if body and body[0] and body[0][0] == "":  # --print-units: the units under the header
        units, body = body[0], body[1:]
    launches = []
    for row in body:
        if len(row) != len(header) or not row[0].strip().isdigit():
            continue  # a ==PROF== or ==WARNING== line among the rows
        launch: dict[str, float | str | None] = {"Kernel Name": row[header.index("Kernel Name")]}
        for column, unit, value in zip(header, units, row, strict=True):
            if column in ALL_METRICS:
                number = _number(value)
                scale = _SCALE.get(unit.strip(), 1.0)
                launch[column] = None if number is None else number * scale
        launches.append(launch)
    return launches


def traffic_of(launch: dict[str, float | str | None]) -> Traffic:
    """One launch of `read_ncu_csv` as a Traffic."""

    def get(metric: str) -> float | None:
        value = launch.get(metric)
        return value if isinstance(value, float) else None

    registers = get(REGISTERS)
    local = [get(LOCAL_LOAD), get(LOCAL_STORE)]
    shared = [get(SHARED_STATIC), get(SHARED_DYNAMIC)]
    compute = _compute_of(get)
    return Traffic(
        **compute,
        kernel=str(launch.get("Kernel Name", "")),
        dram_read_bytes=get(DRAM_READ),
        dram_write_bytes=get(DRAM_WRITE),
        l2_bytes=get(L2_BYTES),
        registers_per_thread=None if registers is None else round(registers),
        achieved_occupancy=get(OCCUPANCY),
        instructions=get(INSTRUCTIONS),
        local_bytes=None if None in local else sum(v for v in local if v is not None),
        time_s=get(DURATION),
        shared_bytes_per_block=None if None in shared else round(sum(v or 0.0 for v in shared)),
    )


def _compute_of(get: Any) -> dict[str, Any]:
    """The compute counters of one launch: the tensor pipe's utilisation (every tensor
    instruction's where ncu gives that, else the busier family's) and the busier family (its
    name), the FMA pipe, the FLOPs counted (SASS FP32/FP64 instructions and tensor-path
    operations; None when no such counter was reported) and the tensor part of them."""
    families = [(get(metric), words) for metric, words in TENSOR_FAMILIES.items()]
    known = [(value, words) for value, words in families if value is not None]
    busiest, kind = max(known, key=lambda pair: pair[0]) if known else (None, "")
    overall = get(TENSOR_PIPE_ANY)
    tensor = overall if overall is not None else busiest
    if not busiest:
        kind = "" if overall is None else "any tensor instruction"
    sass = [(get(metric), weight) for metric, weight in SASS_FLOPS.items()]
    ops = [get(metric) for metric in TENSOR_OPS]
    tensor_flops = sum(v for v in ops if v is not None) if any(v is not None for v in ops) else None
    vector = [v * w for v, w in sass if v is not None]
    flops = None
    if vector or tensor_flops is not None:
        flops = sum(vector) + (tensor_flops or 0.0)
    return {
        "tensor_pipe": tensor,
        "tensor_pipe_kind": kind,
        "fma_pipe": get(FMA_PIPE),
        "flops": flops,
        "tensor_flops": tensor_flops,
    }


# What ncu prints when it may not profile, and the fix to name (the first that matches).
_REFUSALS: Sequence[tuple[str, str]] = (
    (
        "ERR_NVGPUCTRPERM",
        "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): run as root, "
        "or let every user profile (the nvidia module option "
        "NVreg_RestrictProfilingToAdminUsers=0; https://developer.nvidia.com/ERR_NVGPUCTRPERM)",
    ),
    (
        "driver resource was unavailable",
        "another tool holds the GPU's performance counters (DCGM's profiling module, another "
        "ncu): pause it for the run (dcgmi profile --pause, then --resume)",
    ),
    (
        "DCGM",
        "DCGM holds the GPU's performance counters: pause it for the run (dcgmi profile "
        "--pause, then --resume)",
    ),
)


def refusal(output: str) -> str:
    """The one line that names the fix when ncu's output says it could not profile ("" when
    it says nothing of the kind)."""
    for marker, line in _REFUSALS:
        if marker in output:
            return line
    return ""


__all__ = [
    "COMPUTE_METRICS",
    "METRICS",
    "ProfileCsvError",
    "find_ncu",
    "metrics_for",
    "ncu_command",
    "read_ncu_csv",
    "refusal",
    "refused_metrics",
    "traffic_of",
]
