"""A/B of Python callables on a GPU, counted over separate runs (issue 44's must-show).

A user-style repository made here (no kernel of the project's): `mykern.py` holds three
Triton copy kernels and a launcher each; the pull request (HEAD) makes `copy15` read 1.5%
more and `copy30` 3% more (an extra load of a slice of random values whose sum is never
used: a uniform slice would be compressed away by Hopper), leaves `same` as it was (its file
changed, so it is timed: the false-alarm count), edits `unrelated.py`, which no test imports,
and leaves a torch op test that imports nothing of the repository ("same code", not timed).
Each test runs at two sizes. Every run is a separate pytest process with
`--gpuperf --gpuperf-compare=HEAD~1`, as CI runs a pull request; the last run adds
`--gpuperf-explain`, so its failures name head-vs-base DRAM bytes (needs ncu).

    python3 bench/callable_ab.py --runs 20 [--out DIR]

prints one row per test: how many runs regressed (confirmed), passed, or had another state,
and the range of the A/B ratio; then the explained failures' lines and the cost of a run (its
wall, and the GPU lock a measurement held). The repository also holds `copy30` as a kernel the
plugin builds (`copies.hip`, the same 3% extra read at head): `--select 'copy30 and not
kernel'` against `--select kernel_copy30` states what a callable's A/B costs against a
kernel's of the same length.

`--kernel add` makes them `c = a + b` kernels instead (`add15`, `add30`: 1.5% and 3% more of
their reads, which are 2/3 of an add's traffic). `--stored EXPR` saves the tests EXPR selects
three times at base first; every run is then a plain `--gpuperf` judged by those stored
baselines, and the explained run profiles the callable loaded at the saved commit:

    python3 bench/callable_ab.py --kernel add --runs 7 --no-explain \\
        --select "not kernel and not torch"
    python3 bench/callable_ab.py --kernel add --stored add30 --runs 1 --select add30

A confirmed failure on a GPU with ncu is explained even without `--gpuperf-explain` (about
8.5 s a failing test), which is most of a run's wall when the heads regress.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

from lab.projects import git, write_files, write_project
from lab.pytest_runs import NAMED_PLUGIN, Run, gpuperf_args, run_pytest

KERNEL = """
@triton.jit
def {name}_kernel(src, dst, extra, n, EXTRA_PERCENT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(src + offs, mask=mask)
{extra}    tl.store(dst + offs, x, mask=mask)


def {name}(src, dst, extra):
    n = src.numel()
    {name}_kernel[(triton.cdiv(n, 1024),)](src, dst, extra, n, EXTRA_PERCENT={percent}, BLOCK=1024)
"""
# `--kernel add`: c = a + b, whose reads are 2/3 of its traffic (a copy's are 1/2): the extra
# read is 1.5% / 3% of its reads at 30 / 60 per mille of n
ADD_KERNEL = """
@triton.jit
def {name}_kernel(a, b, dst, extra, n, EXTRA_PERCENT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask)
{extra}    tl.store(dst + offs, x, mask=mask)


def {name}(a, b, dst, extra):
    n = a.numel()
    {name}_kernel[(triton.cdiv(n, 1024),)](a, b, dst, extra, n, EXTRA_PERCENT={percent}, BLOCK=1024)
"""
# values in [0, 1) are never above 2: the sum never changes x, the compiler cannot know it
EXTRA = """    e = tl.load(extra + offs, mask=offs < n // 1000 * EXTRA_PERCENT, other=0.0)
    x = x + tl.where(e > 2.0, e, 0.0)
"""

TESTS = """
import pytest
import torch

import mykern

SIZES = [16 << 20, 64 << 20]  # floats: ~30 us and ~120 us a copy on an H100/H200


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("which", ["copy15", "copy30", "same"])
def test_copy(gpu_bench, which, n):
    src = torch.rand(n, device="cuda")
    dst = torch.empty_like(src)
    extra = torch.rand(n, device="cuda")
    launch = getattr(mykern, which)
    gpu_bench.run(lambda: launch(src, dst, extra), bytes=8 * n, name=which)
    torch.cuda.synchronize()
    assert torch.equal(dst, src)
"""

ADD_TESTS = """
import pytest
import torch

import mykern

SIZES = [16 << 20, 64 << 20]  # floats: ~45 us and ~170 us an add on an H200


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("which", ["add15", "add30", "same"])
def test_add(gpu_bench, which, n):
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    dst = torch.empty_like(a)
    extra = torch.rand(n, device="cuda")
    launch = getattr(mykern, which)
    gpu_bench.run(lambda: launch(a, b, dst, extra), bytes=12 * n, name=which)
    torch.cuda.synchronize()
    assert torch.equal(dst, a + b)
"""
# per kernel kind: the template, the tests, and each launcher's extra reads in per mille of n
KINDS = {
    "copy": (KERNEL, TESTS, (("copy15", 15), ("copy30", 30), ("same", 0))),
    "add": (ADD_KERNEL, ADD_TESTS, (("add15", 30), ("add30", 60), ("same", 0))),
}

# The same copy as a kernel the plugin builds (its A/B builds base's from git): what a
# callable's A/B costs against a kernel's of the same length (--select picks one kind).
KERNEL_TWIN = """#include "gpuperf.h"

GPUPERF_KERNEL void copy30k(const float* src, float* dst, const float* extra, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = src[i];
{extra}    dst[i] = x;
}
"""
KERNEL_TWIN_EXTRA = """    if (i < n / 1000 * 30) { float e = extra[i]; if (e > 2.0f) x += e; }
"""
KERNEL_TWIN_TEST = """
import numpy as np
import pytest

SIZES = [16 << 20, 64 << 20]


@pytest.mark.parametrize("n", SIZES)
def test_kernel_copy30(gpu_bench, n):
    kernel = gpu_bench.kernel("copies.hip", "copy30k")
    src = gpu_bench.to_device(np.random.default_rng(0).random(n, dtype=np.float32))
    extra = gpu_bench.to_device(np.random.default_rng(1).random(n, dtype=np.float32))
    dst = gpu_bench.empty(n)
    gpu_bench(kernel, grid=(n + 1023) // 1024, block=1024, args=(src, dst, extra, n),
              bytes=8 * n, name="copy30k")
"""

TORCH_TEST = """
import torch


def test_torch_add(gpu_bench):
    n = 32 << 20
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    c = torch.empty_like(a)
    gpu_bench.run(lambda: torch.add(a, b, out=c), bytes=12 * n, name="add")
"""


def kernels(head: bool, kind: str = "copy") -> str:
    """mykern.py at base (no kernel reads extra) or at head (the pull request)."""
    template, _, launchers = KINDS[kind]
    parts = ["import triton\nimport triton.language as tl\n"]
    for name, percent in launchers:
        extra = EXTRA if head and percent else ""
        parts.append(template.format(name=name, extra=extra, percent=percent))
    return "".join(parts)


def make_repository(root: Path, kind: str = "copy", stored: str = "") -> None:
    """The user's repository: base committed, then the pull request. `stored`: a -k
    expression whose tests are saved three times at base first (the baselines in the work
    tree, recording base's commit), for a stored failure at head."""
    files = {"mykern.py": kernels(head=False, kind=kind), "unrelated.py": "VALUE = 1\n"}
    files.update({"test_copies.py": KINDS[kind][1], "test_torch_op.py": TORCH_TEST})
    files.update({"copies.hip": KERNEL_TWIN.replace("{extra}", ""),
                  "test_kernel_twin.py": KERNEL_TWIN_TEST})  # fmt: skip
    write_project(root, files, "base")
    for _ in range(3 if stored else 0):
        run = run_once(root, root / "save.json", False, stored, ("--gpuperf-save",))
        print(run.summary, flush=True)
    head = {"mykern.py": kernels(head=True, kind=kind), "unrelated.py": "VALUE = 2  # edited\n"}
    write_files(root, {**head, "copies.hip": KERNEL_TWIN.replace("{extra}", KERNEL_TWIN_EXTRA)})
    git(root, "commit", "-qam", "copy15 and copy30 read more; an unrelated edit")


def run_once(
    root: Path, report: Path, explain: bool, select: str = "", options: tuple[str, ...] = ()
) -> Run:
    """One pytest process, as CI runs a pull request (`options`: instead of the compare)."""
    args = ["-q", *NAMED_PLUGIN, *gpuperf_args("cuda"), *(options or ("--gpuperf-compare=HEAD~1",))]
    args += ["--gpuperf-explain"] if explain else []
    args += ["-k", select] if select else []
    return run_pytest(args, report, cwd=root, timeout_s=1800)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None, help="folder for each run's report")
    parser.add_argument(
        "--no-explain", action="store_true", help="no --gpuperf-explain on the last run"
    )
    parser.add_argument(
        "--select",
        default="",
        help="-k expression: e.g. 'copy30 and not kernel' against "
        "'kernel_copy30', the cost of a callable's A/B against a kernel's of the same length",
    )
    parser.add_argument(
        "--kernel", choices=sorted(KINDS), default="copy",
        help="the Triton kernels: a copy, or c = a + b (reads 2/3 of its traffic)",
    )  # fmt: skip
    parser.add_argument(
        "--stored", default="",
        help="-k expression: save these tests 3 times at base; then every run is a plain "
        "--gpuperf (no compare), judged by the stored baselines (and explained against the "
        "saved commit on the last run)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="callable-ab-"))
    root = work / "project"
    make_repository(root, args.kernel, args.stored)
    options = ("-k", args.stored) if args.stored else ()
    out = args.out or work
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    ratios: dict[str, list[float]] = collections.defaultdict(list)
    walls: list[float] = []
    locks: list[float] = []
    last: Run | None = None
    for number in range(args.runs):
        explain = number == args.runs - 1 and not args.no_explain
        run = run_once(root, out / f"run-{number:02d}.json", explain, args.select, options)
        walls.append(run.wall_s)
        last = run
        if run.report is None:
            print(f"run {number}: {run.problem}\n{run.output[-3000:]}", flush=True)
            continue
        for row in run.rows:
            c = row.verdict.comparison
            test = row.test_id.split("::")[-1]
            state, ratio = getattr(c, "state", None), getattr(c, "ratio", None)
            counts[test][state or f"stored {row.verdict.baseline.outcome}"] += 1
            if isinstance(ratio, float):
                ratios[test].append(ratio)
            again = getattr(getattr(c, "confirmation", None), "ratio", None)
            print(
                f"  {test}: {state} {ratio} (first {getattr(c, 'first_state', '') or '-'}, "
                f"again {again}) drift {getattr(c, 'drift_basis', None)} loads "
                f"{getattr(c, 'loads', None)}",
                flush=True,
            )
        lock_s = run.lock_s or 0.0
        measured = len(run.rows)
        locks.append(lock_s / max(measured, 1))
        print(
            f"run {number}: {run.document['summary']['line']} ({run.wall_s:.1f} s, GPU lock "
            f"{lock_s:.2f} s for {measured} measurements)",
            flush=True,
        )
    print(f"\n{'test':<28} {'runs':>4} {'regressed':>9} {'pass':>5} {'other':<22} ratio")
    for test in sorted(counts):
        seen = counts[test]
        other = ", ".join(f"{k} {v}" for k, v in seen.items() if k not in ("regressed", "pass"))
        spread = f"{min(ratios[test]):.4f}-{max(ratios[test]):.4f}" if ratios[test] else "-"
        print(
            f"{test:<28} {sum(seen.values()):>4} {seen['regressed']:>9} {seen['pass']:>5} "
            f"{other:<22} {spread}"
        )
    explained = "" if args.no_explain else " (the last with --gpuperf-explain)"
    print(f"\nwall of a run: {min(walls):.1f}-{max(walls):.1f} s{explained}")
    if locks:
        print(f"GPU lock a measurement: {min(locks):.2f}-{max(locks):.2f} s")
    print("\nthe explained run (--gpuperf-explain): each failure's explain and code lines")
    for row in last.rows if last is not None else ():
        explain = row.verdict.explain or {}
        lines = [*((explain.get("traffic") or {}).get("lines") or [])]
        lines += (explain.get("code") or {}).get("lines") or []
        if lines:
            print(f"  {row.test_id.split('::')[-1]}:")
            print("\n".join(f"    {line}" for line in lines))
    print("\nits output, the end:")
    print(last.output[-2000:] if last is not None else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
