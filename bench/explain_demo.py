"""A regression explains itself, in a user's repository: the explain pass on a kernel of the
repository's own (not one the plugin ships) whose head reads 1.5% and 3% more than its base,
and one whose head changes only a comment.

The project: `gather.hip` variants, each `gather4` (c[i] = a[i] + a[i+n] + a[i+2n] + a[i+3n]:
16 n bytes read, 4 n written) committed as the base; the work tree's head reads EXTRA_PERMILLE
per mille of those 16 n bytes more from `extra` (random values, so the GPU cannot compress
them, and never 1e30, so the result never changes). The truth: DRAM read bytes +1.5% and
+3.0%; the comment-only edit builds the same code. A fourth test feeds the unchanged kernel
one constant value, which the GPU compresses: its bytes check must name that. The script runs
`pytest --gpuperf --gpuperf-compare=HEAD --gpuperf-explain` there and compares what each
failure names with the truth.

  PYTHONPATH=. python3 bench/explain_demo.py --backend cuda --out $OUT   # on the H100

Writes pytest.txt (the run's output: the failure texts), report.json (--gpuperf-json),
summary.md (the Markdown) and explain.json (truth, measured, cost per test) under --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # lab, also when imported as bench.*

from lab.projects import commit_all
from lab.pytest_runs import NAMED_PLUGIN, gpuperf_args, run_pytest
from lab.runs import scratch

KERNEL = """\
#include "gpuperf.h"
#define EXTRA_PERMILLE {permille}
// {comment}
GPUPERF_KERNEL void gather4(const float* a, float* c, const float* extra, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int extra_n = (int)((long long)n * 4 * EXTRA_PERMILLE / 1000);
    if (i < n) {{
        float value = ((a[i] + a[i + n]) + a[i + 2 * n]) + a[i + 3 * n];
        if (i < extra_n && extra[i] == 1.0e30f) {{
            value = 0.0f;
        }}
        c[i] = value;
    }}
}}
"""

TEST = """\
import numpy as np
import pytest

N = 16 << 20  # 256 MiB read, 64 MiB written: beyond the L2


@pytest.mark.parametrize("variant", ["read15", "read30", "comment"])
def test_gather(gpu_bench, variant):
    kernel = gpu_bench.kernel(f"{variant}.hip", "gather4")
    rng = np.random.default_rng(0)
    a = rng.random(4 * N, dtype=np.float32)
    extra = rng.random(N, dtype=np.float32)
    da, de, dc = gpu_bench.to_device(a), gpu_bench.to_device(extra), gpu_bench.empty(N)
    gpu_bench(kernel, grid=N // 256, block=256, args=(da, dc, de, N), reads=(a,), writes=(dc,))
    expected = ((a[:N] + a[N : 2 * N]) + a[2 * N : 3 * N]) + a[3 * N :]
    np.testing.assert_allclose(gpu_bench.from_device(dc, np.float32, N), expected, rtol=1e-6)


def test_constant_input(gpu_bench):
    # one value everywhere, written on the device (cuMemsetD8): what the GPU may compress;
    # the bytes check names it rather than calling the declaration wrong
    kernel = gpu_bench.kernel("comment.hip", "gather4")
    da, de, dc = gpu_bench.empty(4 * N), gpu_bench.empty(N), gpu_bench.empty(N)
    gpu_bench.fill(da, 0x3F)
    gpu_bench.fill(de, 0)
    gpu_bench(kernel, grid=N // 256, block=256, args=(da, dc, de, N), reads=(da,), writes=(dc,))
    x = np.full(4, 0x3F, np.uint8).view(np.float32)[0]
    np.testing.assert_array_equal(gpu_bench.from_device(dc, np.float32, N), ((x + x) + x) + x)
"""

HEADS = {"read15": 15, "read30": 30, "comment": 0}  # per mille of the read bytes, in head


def make_project(root: Path, at_base: Callable[[], None] = lambda: None) -> None:
    """The base committed, `at_base()` run on it (--stored: the saves), then the head written
    into the work tree."""
    root.mkdir(parents=True, exist_ok=True)
    for variant in HEADS:
        source = KERNEL.format(permille=0, comment="base")
        (root / f"{variant}.hip").write_text(source)
    (root / "test_gather.py").write_text(TEST)
    commit_all(root, "base")
    at_base()
    for variant, permille in HEADS.items():  # the pull request, in the work tree
        comment = "head: reads more" if permille else "head: only this comment changed"
        (root / f"{variant}.hip").write_text(KERNEL.format(permille=permille, comment=comment))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", default="0.5")
    parser.add_argument("-k", default="", help="pytest's -k: which of the project's tests")
    parser.add_argument("--stored", action="store_true", help="no --gpuperf-compare: three "
                        "saves of the base first, then head judged against them (the failure "
                        "explained against the saved commit)")  # fmt: skip
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    with scratch("explain-demo") as folder:
        root = folder / "project"
        pytest = [*NAMED_PLUGIN, *gpuperf_args(options.backend, budget=options.budget),
                  *(["-k", options.k] if options.k else [])]  # fmt: skip

        def saves() -> None:
            for n in range(3):
                run_pytest([*pytest, "--gpuperf-save", "-q"], folder / f"save{n}.json", cwd=root)

        make_project(root, saves if options.stored else lambda: None)
        against = [] if options.stored else ["--gpuperf-compare=HEAD"]
        run = run_pytest(
            [*pytest, *against, "--gpuperf-explain", "-v",
             f"--gpuperf-markdown={options.out / 'summary.md'}"],
            options.out / "report.json", cwd=root, timeout_s=560,
        )  # fmt: skip
    (options.out / "pytest.txt").write_text(run.output)
    rows = []
    for row in run.rows:
        variant = row.test_id.split("[")[-1].rstrip("]").split("::")[-1]
        explain = row.verdict.explain or {}
        traffic = explain.get("traffic") or {}
        head, base = traffic.get("head") or {}, traffic.get("base") or {}
        measured = None
        if head.get("dram_read_bytes") and base.get("dram_read_bytes"):
            measured = head["dram_read_bytes"] / base["dram_read_bytes"] - 1
        rows.append({
            "variant": variant, "truth_read_change": HEADS.get(variant, 0) / 1000,
            "measured_read_change": measured, "verdict": row.verdict.status,
            "lines": traffic.get("lines"), "cost_s": traffic.get("cost_s"),
            "problem": traffic.get("problem"),
            "bytes_check": (explain.get("bytes_check") or {}).get("line"),
        })  # fmt: skip
    summary = {"exit": run.returncode, "wall_s": run.wall_s, "rows": rows}
    (options.out / "explain.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
