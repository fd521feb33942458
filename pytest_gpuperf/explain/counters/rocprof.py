"""ROCm's `rocprofv3` as the profiler of an explain pass: the command line and its CSV.

Written from rocprofv3's public documentation ("Using rocprofv3", ROCprofiler-SDK): with
`--pmc ... --output-format csv` it writes `<name>_counter_collection.csv` (under `pass_1/`
in some releases), one row per counter per kernel dispatch, with the dispatch's VGPR, SGPR
and scratch columns on every row. FETCH_SIZE and WRITE_SIZE are kilobytes moved to and from
video memory; TCC_HIT_sum and TCC_MISS_sum count L2 requests. No AMD GPU has run this code:
the tests read a file laid out as the documentation shows it.
"""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Iterable
from pathlib import Path

from pytest_gpuperf.explain.counters.ncu import ProfileCsvError
from pytest_gpuperf.explain.counters.traffic import Traffic

COUNTERS = ("FETCH_SIZE", "WRITE_SIZE", "TCC_HIT_sum", "TCC_MISS_sum")
KILOBYTE = 1024
OUTPUT_NAME = "gpuperf"


def find_rocprofv3() -> Path | None:
    found = shutil.which("rocprofv3")
    if found:
        return Path(found)
    default = Path("/opt/rocm/bin/rocprofv3")
    return default if default.is_file() else None


def rocprof_command(rocprofv3: Path, *, output_dir: Path) -> list[str]:
    """The profiler's part of the child's command line (the application follows `--`).
    rocprofv3 has no cache control: a cold launch is cold by the flush the fixture runs
    before it."""
    return [
        str(rocprofv3),
        "--pmc",
        *COUNTERS,
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


def read_rocprof_csv(texts: Iterable[str]) -> list[Traffic]:
    """Each dispatch of rocprofv3's counter CSVs (one per pass), in dispatch order."""
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


__all__ = [
    "COUNTERS",
    "counter_files",
    "find_rocprofv3",
    "read_rocprof_csv",
    "rocprof_command",
]
