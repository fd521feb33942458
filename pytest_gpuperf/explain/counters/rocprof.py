"""ROCm's `rocprofv3` as the profiler of an explain pass: the command line and its CSV.

Written from rocprofv3's public documentation ("Using rocprofv3", ROCprofiler-SDK): with
`--pmc ... --output-format csv` it writes `<name>_counter_collection.csv` (under `pass_1/`
in some releases), one row per counter per kernel dispatch, with the dispatch's VGPR, SGPR
and scratch columns on every row. FETCH_SIZE and WRITE_SIZE are kilobytes moved to and from
video memory; TCC_HIT_sum and TCC_MISS_sum count L2 requests. No AMD GPU has run this code:
the tests read a file laid out as the documentation shows it.

A test that declared its FLOPs also asks for the compute counters of AMD's "MI300 and MI200
performance counters" page, in passes of their own (an input file, one `pmc:` line a pass):
SQ_INSTS_VALU_MFMA_MOPS_<type> count matrix (MFMA) operations in units of 512, the VALU's
FMA/ADD/MUL instructions are counted per wavefront (64 lanes, an FMA two FLOPs), as ROCm
Compute Profiler counts FLOPs; the matrix pipe's utilisation is ROCm Compute Profiler's
MFMA utilisation, SQ_VALU_MFMA_BUSY_CYCLES over the SIMDs' cycles (GRBM_GUI_ACTIVE per XCD x
CUs x 4 SIMDs). Untested on hardware, like the rest of this module.
"""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_gpuperf.explain.counters.ncu import ProfileCsvError
from pytest_gpuperf.explain.counters.traffic import Traffic

COUNTERS = ("FETCH_SIZE", "WRITE_SIZE", "TCC_HIT_sum", "TCC_MISS_sum")
KILOBYTE = 1024
OUTPUT_NAME = "gpuperf"
MFMA_OPS = (
    "SQ_INSTS_VALU_MFMA_MOPS_F16",
    "SQ_INSTS_VALU_MFMA_MOPS_BF16",
    "SQ_INSTS_VALU_MFMA_MOPS_F32",
    "SQ_INSTS_VALU_MFMA_MOPS_F64",
)
MFMA_OPS_UNIT = 512  # "Number of ... MFMA ops in the unit of 512"
VALU_FLOPS = {"SQ_INSTS_VALU_FMA_F32": 2, "SQ_INSTS_VALU_ADD_F32": 1, "SQ_INSTS_VALU_MUL_F32": 1}
WAVE_LANES = 64
MFMA_BUSY, GUI_ACTIVE = "SQ_VALU_MFMA_BUSY_CYCLES", "GRBM_GUI_ACTIVE"
SIMDS_PER_CU = 4
# The compute counters' passes (a pass holds only as many counters as the hardware collects
# at once; these groups of four follow ROCm Compute Profiler's own)
COMPUTE_PASSES = (
    (*MFMA_OPS,),
    (*VALU_FLOPS, MFMA_BUSY),
    (GUI_ACTIVE,),
)


def find_rocprofv3() -> Path | None:
    found = shutil.which("rocprofv3")
    if found:
        return Path(found)
    default = Path("/opt/rocm/bin/rocprofv3")
    return default if default.is_file() else None


def rocprof_command(rocprofv3: Path, *, output_dir: Path, compute: bool = False) -> list[str]:
    """The profiler's part of the child's command line (the application follows `--`).
    rocprofv3 has no cache control: a cold launch is cold by the flush the fixture runs
    before it. `compute`: the compute counters too, each group a pass of an input file."""
    if compute:
        output_dir.mkdir(parents=True, exist_ok=True)
        passes = output_dir / "passes.txt"
        groups = (COUNTERS, *COMPUTE_PASSES)
        passes.write_text("".join(f"pmc: {' '.join(group)}\n" for group in groups))
        counters = ["-i", str(passes)]
    else:
        counters = ["--pmc", *COUNTERS]
    return [
        str(rocprofv3),
        *counters,
        "--output-format",
        "csv",
        "-d",
        str(output_dir),
        "-o",
        OUTPUT_NAME,
        "--",
    ]


def counter_files(output_dir: Path) -> list[Path]:
    """The counter CSVs rocprofv3 wrote under `output_dir` (its layout moved between releases)."""
    return sorted(output_dir.rglob("*counter_collection.csv"))


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


def read_rocprof_csv(
    texts: Iterable[str], *, compute_units: int = 0, xcds: int = 1
) -> list[Traffic]:
    """Each dispatch of rocprofv3's counter CSVs (one per pass), in dispatch order;
    `compute_units` and `xcds` (the device's) turn MFMA busy cycles into a utilisation."""
    dispatches: dict[int, dict[str, object]] = {}
    for text in texts:
        rows = list(csv.DictReader(io.StringIO(text)))
        for row in rows:
            try:
                dispatch = int(row["Dispatch_Id"])
                name, value = row["Counter_Name"], float(row["Counter_Value"])
            except (KeyError, TypeError, ValueError) as bad:
                raise ProfileCsvError(f"a rocprofv3 counter row could not be read: {bad}") from None
            seen = dispatches.setdefault(dispatch, {"kernel": row.get("Kernel_Name", "")})
            seen[name] = value
            for column in ("VGPR_Count", "SGPR_Count", "Scratch_Size"):
                seen[column] = _int(row.get(column, "") or "")
    found = []
    for dispatch in sorted(dispatches):
        seen = dispatches[dispatch]

        def get(name: str, seen: dict[str, object] = seen) -> float | None:
            value = seen.get(name)
            return value if isinstance(value, float) else None

        fetch, write = get("FETCH_SIZE"), get("WRITE_SIZE")
        vgpr, sgpr, scratch = (
            seen.get("VGPR_Count"),
            seen.get("SGPR_Count"),
            seen.get("Scratch_Size"),
        )
        found.append(
            Traffic(
                **_compute_of(get, compute_units, xcds),
                kernel=str(seen["kernel"]),
                dram_read_bytes=None if fetch is None else fetch * KILOBYTE,
                dram_write_bytes=None if write is None else write * KILOBYTE,
                l2_hits=get("TCC_HIT_sum"),
                l2_misses=get("TCC_MISS_sum"),
                registers_per_thread=vgpr if isinstance(vgpr, int) else None,
                scalar_registers=sgpr if isinstance(sgpr, int) else None,
                scratch_per_thread_bytes=scratch if isinstance(scratch, int) else None,
            )
        )
    return found


def _compute_of(get: Any, compute_units: int, xcds: int) -> dict[str, Any]:
    """The compute counters of one dispatch (each None when not collected)."""
    mops = [get(name) for name in MFMA_OPS]
    tensor = None
    if any(v is not None for v in mops):
        tensor = MFMA_OPS_UNIT * sum(v for v in mops if v is not None)
    valu = [(get(name), weight) for name, weight in VALU_FLOPS.items()]
    vector = [WAVE_LANES * v * w for v, w in valu if v is not None]
    flops = None if tensor is None and not vector else (tensor or 0.0) + sum(vector)
    busy, active = get(MFMA_BUSY), get(GUI_ACTIVE)
    pipe = None
    if busy is not None and active and compute_units:
        pipe = busy / (active / max(xcds, 1) * compute_units * SIMDS_PER_CU)
    return {
        "tensor_pipe": pipe,
        "tensor_pipe_kind": "MFMA" if pipe is not None else "",
        "flops": flops,
        "tensor_flops": tensor,
    }


__all__ = [
    "COUNTERS",
    "counter_files",
    "find_rocprofv3",
    "read_rocprof_csv",
    "rocprof_command",
]
