#!/usr/bin/env python3
"""A stand-in for Nsight Compute's `ncu`, for the explain pass's plumbing tests (it proves the
child process, the plan and the parsing, not the counters: its numbers are SIMULATED).

FAKE_NCU_MODE picks what it does: "ok" runs the application and writes a raw-page CSV with one
row per planned launch (DRAM read = the declared bytes x FAKE_NCU_READ_SCALE, base's x 1.0);
"perm" prints ncu's ERR_NVGPUCTRPERM refusal and runs the application unprofiled, as ncu does;
"dcgm" prints the refusal of counters held by another tool; "hang" sleeps; "fail" exits 3;
"garbage" runs the application and then prints bytes that are no CSV (and no text), exit 0.
FAKE_NCU_GRANDCHILD=<pid file> first starts a grandchild in a session of its own that keeps
the profiler's output open for a minute (as a profiler's helper may), its pid in that file;
FAKE_NCU_FLOOD_MB=<n> first prints n MB of output.

The compute counters (asked for a test that declared its FLOPs): FAKE_NCU_FLOPS=<n> is what
a launch counts on the tensor path (sm__ops_path_tensor_src_bf16_dst_fp32), base's x 1.0 and
head's x FAKE_NCU_FLOPS_SCALE; the tensor pipe is 80% busy on base and 80% x
FAKE_NCU_TENSOR_SCALE on head, the FMA pipe 5% on both. FAKE_NCU_UNKNOWN=<base,...> names
metrics this "card" does not know: asked for, ncu prints its "Failed to find metric" error
for each and exits 1 without running the application.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

FLAGS = {"--csv"}


def main() -> int:
    args = sys.argv[1:]
    options, position = {}, 0
    while position < len(args) and args[position].startswith("--"):
        if args[position] in FLAGS:
            options[args[position]] = True
            position += 1
        else:
            options[args[position]] = args[position + 1]
            position += 2
    application = args[position:]
    mode = os.environ.get("FAKE_NCU_MODE", "ok")
    unknown = [name for name in os.environ.get("FAKE_NCU_UNKNOWN", "").split(",") if name]
    refused = [m for m in options.get("--metrics", "").split(",") if m.split(".")[0] in unknown]
    if refused:
        for metric in refused:
            print(f"==ERROR== Failed to find metric {metric}", flush=True)
        return 1
    pid_file = os.environ.get("FAKE_NCU_GRANDCHILD")
    if pid_file:
        holder = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
        )
        Path(pid_file).write_text(str(holder.pid), encoding="utf-8")
    flood_mb = int(os.environ.get("FAKE_NCU_FLOOD_MB", "0"))
    chunk = ("==PROF== " + "x" * 1014 + "\n") * 1024  # 1 MiB of lines
    for _ in range(flood_mb):
        sys.stdout.write(chunk)
    sys.stdout.flush()
    if mode == "hang":
        time.sleep(600)
    if mode == "fail":
        print("==ERROR== the fake ncu failed", flush=True)
        return 3
    if mode == "perm":
        print(
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
            "NVIDIA GPU Performance Counters on the target device 0.",
            flush=True,
        )
    if mode == "dcgm":
        print(
            "==ERROR== Profiling failed because a driver resource was unavailable. Ensure "
            "that no other tool (like DCGM) is concurrently collecting profiling data.",
            flush=True,
        )
    done = subprocess.run(application, check=False)
    if mode == "garbage":
        sys.stdout.flush()
        sys.stdout.buffer.write(bytes(range(256)) * 64 + b'\n"ID","Kernel Name"\n"x",\xff\xfe\n')
        sys.stdout.flush()
        return 0
    if mode != "ok":
        return done.returncode
    plan = os.environ["GPUPERF_PROFILE_PLAN"]
    scale = float(os.environ.get("FAKE_NCU_READ_SCALE", "1.0"))
    metrics = options["--metrics"].split(",")
    header = [
        "ID",
        "Process ID",
        "Process Name",
        "Host Name",
        "Kernel Name",
        "Context",
        "Stream",
        "Block Size",
        "Grid Size",
        "Device",
        "CC",
        *metrics,
    ]
    units = {
        "dram__bytes_read.sum": "byte",
        "dram__bytes_write.sum": "byte",
        "lts__t_bytes.sum": "byte",
        "gpu__time_duration.sum": "ns",
        "sm__warps_active.avg.pct_of_peak_sustained_active": "%",
        "launch__registers_per_thread": "register/thread",
        "smsp__inst_executed.sum": "inst",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "%",
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": "%",
        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": "%",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": "%",
    }
    lines = ["==PROF== Connected to process 4711", ",".join(f'"{h}"' for h in header)]
    lines.append(",".join(f'"{units.get(h, "") if h in metrics else ""}"' for h in header))
    text = Path(plan).read_text(encoding="utf-8")
    entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    flops = float(os.environ.get("FAKE_NCU_FLOPS", "0"))
    for number, entry in enumerate(entries):
        declared = entry["declared_bytes"]
        head = entry["side"] == "head"
        read = declared * (scale if head else 1.0) / 2
        tensor = float(os.environ.get("FAKE_NCU_TENSOR_SCALE", "1")) if head else 1.0
        counted = flops * (float(os.environ.get("FAKE_NCU_FLOPS_SCALE", "1")) if head else 1.0)
        values = {
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": 80 * tensor,
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": 80 * tensor,
            "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": 5,
            "sm__ops_path_tensor_src_bf16_dst_fp32.sum": counted,
            "dram__bytes_read.sum": read,
            "dram__bytes_write.sum": declared / 2,
            "lts__t_bytes.sum": declared,
            "gpu__time_duration.sum": 1000,
            "sm__warps_active.avg.pct_of_peak_sustained_active": 80,
            "launch__registers_per_thread": 16,
            "smsp__inst_executed.sum": 1000,
        }
        row = [
            str(number),
            "4711",
            "python3",
            "127.0.0.1",
            entry["kernel"],
            "1",
            "7",
            "(256, 1, 1)",
            "(4, 1, 1)",
            "0",
            "9.0",
        ]
        row += [f"{values.get(m, 0):,.0f}" for m in metrics]  # "33,559,808", as ncu writes
        lines.append(",".join(f'"{v}"' for v in row))
    with open(options["--log-file"], "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
