"""The roofline on a GPU, end to end (issue 56's must-shows), in one scratch repository:

1. a bf16 torch.matmul and a Triton matmul (tests/perf/triton_matmul.py's tiled `tl.dot`
   kernel, the grouped order of Triton's matmul tutorial), 8192^3, measured through the
   plugin (a pytest process, `--gpuperf-json`) and, in the same process right after, by
   `triton.testing.do_bench` for the same call: achieved TFLOP/s both ways (within 1% of each
   other) and the fraction of the data sheet's dense bf16 peak;
2. a `min_flops` floor set halfway between the two kernels' compute efficiencies: the slower
   one fails;
3. an fp32 matmul whose pull request turns TF32 off (`torch.backends.cuda.matmul.allow_tf32 =
   False`: the same FLOPs without tensor cores), through `--gpuperf-compare=HEAD` and through
   a stored baseline (`--gpuperf-save` at the base commit, then a judged run): both fail, and
   the explain pass (ncu) names the tensor pipe's utilisation that fell.

One table last. About 3-4 minutes of GPU time (budgets of 0.5 s; the explain passes replay a
few launches under ncu). Needs CUDA, torch, triton and Nsight Compute's ncu:

  PYTHONPATH=. python3 bench/roofline.py --out $OUT

--out keeps each run's pytest output and JSON report. Nothing here decides anything the gate
decides: the verdicts are the plugin's, read from its JSON reports.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # lab, run from anywhere

from lab.projects import commit_all, write_project
from lab.pytest_runs import NAMED_PLUGIN, plugin_env
from lab.pytest_runs import run_pytest as lab_pytest
from lab.runs import scratch
from lab.tables import text_table

# the Triton matmul the perf suite measures, copied into the scratch repository as mm.py
MM = (Path(__file__).resolve().parents[1] / "tests" / "perf" / "triton_matmul.py").read_text()

TEST_BF16 = """\
import json
import os

import pytest
import torch
import triton.testing

import mm

SIZE = 8192
FLOOR = float(os.environ.get("ROOFLINE_FLOOR", "0"))
floor = [pytest.mark.min_flops(FLOOR)] if FLOOR else []


@pytest.mark.parametrize("kernel", ["torch", "triton"])
@pytest.mark.parametrize("_", [pytest.param(0, marks=floor)], ids=["8192"])
def test_matmul_bf16(gpu_bench, kernel, _):
    device = torch.device("cuda", gpu_bench.info.index)
    generator = torch.Generator(device=device).manual_seed(56)
    a = torch.randn(SIZE, SIZE, device=device, dtype=torch.bfloat16, generator=generator)
    b = torch.randn(SIZE, SIZE, device=device, dtype=torch.bfloat16, generator=generator)
    c = torch.empty(SIZE, SIZE, device=device, dtype=torch.bfloat16)
    if kernel == "torch":
        fn = lambda: torch.matmul(a, b, out=c)  # noqa: E731
    else:
        fn = lambda: mm.triton_matmul(a, b, c)  # noqa: E731
    gpu_bench.run(fn, reads=(a, b), writes=(c,), flops=gpu_bench.gemm_flops(SIZE, SIZE, SIZE),
                  math="bf16", cache="cold", name=kernel)
    torch.cuda.synchronize(device)
    expected = a[:256].float() @ b.float()  # a slice: enough to catch a wrong kernel
    torch.testing.assert_close(c[:256].float(), expected, rtol=2e-2, atol=0.5)
    path = os.environ.get("ROOFLINE_DO_BENCH")
    if path:  # the same call, right after, in the same process and the same thermal state
        ms = triton.testing.do_bench(fn, warmup=100, rep=500, return_mode="median")
        with open(path, "a") as out:
            out.write(json.dumps({"kernel": kernel, "ms": ms}) + "\\n")
"""

TEST_TF32 = """\
import torch

TF32 = True  # the pull request sets it False: the same fp32 FLOPs without tensor cores
SIZE = 4096


def test_matmul_fp32(gpu_bench):
    device = torch.device("cuda", gpu_bench.info.index)
    generator = torch.Generator(device=device).manual_seed(56)
    a = torch.randn(SIZE, SIZE, device=device, generator=generator)
    b = torch.randn(SIZE, SIZE, device=device, generator=generator)
    c = torch.empty(SIZE, SIZE, device=device)

    def matmul():  # the flag is read at each call: set it in the call, not the test body
        torch.backends.cuda.matmul.allow_tf32 = TF32
        torch.matmul(a, b, out=c)

    gpu_bench.run(matmul, reads=(a, b), writes=(c,), math="tf32",
                  flops=gpu_bench.gemm_flops(SIZE, SIZE, SIZE), cache="cold", name="fp32")
    torch.cuda.synchronize(device)
    torch.testing.assert_close(c[:64], a[:64].double().matmul(b.double()).float(),
                               rtol=1e-2, atol=1e-1)
"""


def run_pytest(root: Path, name: str, args: list[str], out: Path | None, **env: str) -> dict:
    """One pytest process in the scratch repository (with the variables `env`): its JSON
    report as written, checked by the plugin's reader (an empty one when the run wrote none
    or one the reader refuses), and its output, kept under --out."""
    report = root / f"{name}.json"
    options = [*NAMED_PLUGIN, "-q", "--gpuperf-backend=cuda", "--gpuperf-budget=0.5",
               "--gpuperf-explain-timeout=300", *args]  # fmt: skip
    run = lab_pytest(options, report, cwd=root, env=plugin_env(**env), timeout_s=None)
    print(f"[{name}] exit {run.returncode} in {run.wall_s:.0f} s: {' '.join(args)}", flush=True)
    if out is not None:
        (out / f"{name}.txt").write_text(run.output)
        if report.exists():
            shutil.copyfile(report, out / f"{name}.json")
    if run.report is None:
        print(f"{run.problem}\n{run.output[-6000:]}", file=sys.stderr)
        return {"results": [], "devices": []}
    return run.document


def rows_of(document: dict) -> dict[str, dict]:
    return {row["measurement"]["name"]: row for row in document.get("results", [])}


def explain_line(row: dict | None, words: str) -> str:
    """The first line of the row's explanation that contains `words` ("" when none)."""
    explain = ((row or {}).get("verdict") or {}).get("explain") or {}
    lines = (explain.get("traffic") or {}).get("lines") or []
    return next((line for line in lines if words in line), "")


Row = list[object]


def plugin_against_do_bench(root: Path, out: Path | None) -> tuple[str, list[Row], dict]:
    """Step 1: each bf16 kernel's TFLOP/s by the plugin and by do_bench, and its compute
    efficiency (for step 2)."""
    timings = root / "do_bench.jsonl"
    document = run_pytest(
        root, "bf16", ["test_bf16.py", "--gpuperf"], out, ROOFLINE_DO_BENCH=str(timings)
    )
    device = (document.get("devices") or [{}])[0].get("name", "?")
    lines = timings.read_text().splitlines() if timings.exists() else []
    bench_ms = {entry["kernel"]: entry["ms"] for entry in map(json.loads, lines)}
    rows: list[Row] = []
    efficiencies = {}
    for kernel, row in rows_of(document).items():
        roofline = row["measurement"]["roofline"]
        ms = bench_ms.get(kernel)
        do_bench = roofline["flops"] / (ms * 1e-3) if ms else float("nan")
        gap = roofline["flops_per_s"] / do_bench - 1.0
        efficiencies[kernel] = roofline["compute_efficiency"]
        tflops = f"{roofline['flops_per_s'] / 1e12:.1f} vs {do_bench / 1e12:.1f} TFLOP/s"
        peak = f"the dense bf16 peak {roofline['peak_flops_per_s'] / 1e12:.1f}"
        result = f"{tflops} ({gap:+.2%}); {roofline['compute_efficiency']:.1%} of {peak}"
        verdict = "ok" if abs(gap) <= 0.01 else "OFF BY MORE THAN 1%"
        rows.append([f"{kernel} bf16 8192^3: plugin vs do_bench", result, verdict])
    return device, rows, efficiencies


def floor_between(root: Path, out: Path | None, efficiencies: dict) -> list[Row]:
    """Step 2: a min_flops floor halfway between the two kernels; the slower must fail."""
    if len(efficiencies) != 2:
        return [["min_flops between the kernels", "step 1 measured fewer than two", "NOT SHOWN"]]
    floor = round(sum(efficiencies.values()) / 2, 3)
    document = run_pytest(
        root, "floor", ["test_bf16.py", "--gpuperf"], out, ROOFLINE_FLOOR=str(floor)
    )
    slower = min(efficiencies, key=efficiencies.__getitem__)
    rows: list[Row] = []
    for kernel, row in rows_of(document).items():
        status = row["verdict"]["status"]
        expected = "fail" if kernel == slower else "pass"
        efficiency = (row["verdict"]["flops_floor"] or {}).get("efficiency", 0.0)
        result = f"{status}: compute efficiency {efficiency:.1%}"
        verdict = "ok" if status == expected else f"EXPECTED {expected}"
        rows.append([f"min_flops({floor}): {kernel}", result, verdict])
    return rows


def tf32_off(root: Path, out: Path | None) -> list[Row]:
    """Step 3: TF32 turned off in the pull request, through the A/B and the stored gate."""
    saved = run_pytest(root, "save", ["test_tf32.py", "--gpuperf-save"], out)
    print(f"[save] {len(saved.get('results', []))} baseline(s) saved", flush=True)
    commit_all(root, "baseline saved")
    tf32 = (root / "test_tf32.py").read_text()
    (root / "test_tf32.py").write_text(tf32.replace("TF32 = True", "TF32 = False"))
    rows: list[Row] = []
    for name, args, check, what in (
        ("ab", ["--gpuperf-compare=HEAD"], "comparison", "A/B against HEAD"),
        ("stored", ["--gpuperf"], "baseline", "stored baseline"),
    ):
        document = run_pytest(root, name, ["test_tf32.py", *args, "--gpuperf-explain"], out)
        row = rows_of(document).get("fp32")
        verdict = (row or {}).get("verdict") or {}
        state = (verdict.get(check) or {}).get("state" if check == "comparison" else "outcome")
        fell = explain_line(row, "tensor pipe utilisation fell")
        shown = verdict.get("status") == "fail" and state == "regressed" and fell
        result = f"{verdict.get('status')} ({state}); explain: {fell or 'no tensor-pipe line'}"
        rows.append([f"TF32 off, {what}", result, "ok" if shown else "NOT SHOWN"])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="a folder for each run's pytest output and JSON report")
    options = parser.parse_args()
    out = Path(options.out) if options.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    with scratch("gpuperf-roofline") as folder:
        root = folder / "project"
        files = {"mm.py": MM, "test_bf16.py": TEST_BF16, "test_tf32.py": TEST_TF32}
        write_project(root, files, "base")
        device, table, efficiencies = plugin_against_do_bench(root, out)
        table += floor_between(root, out, efficiencies)
        table += tf32_off(root, out)
    print()
    print(f"device: {device}")
    print(text_table(["check", "result", "verdict"], table))
    return 0 if table and all(row[2] == "ok" for row in table) else 1


if __name__ == "__main__":
    raise SystemExit(main())
