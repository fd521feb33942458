"""What real library code does to a measurement, on a real GPU (issue 54): a torch op that
synchronises the host (`.item()`, a boolean mask), one that allocates its output every call,
one that forks work to a side stream and joins it, one that updates its input in place, a
Triton kernel behind `@triton.autotune`, and a setup that waits. Each runs through a user's
pytest (`pytest --gpuperf`, and the A/B under `--gpuperf-compare` for the one that hung the
gate) in a separate process with a hard timeout, and its numbers are held against
`triton.testing.do_bench` on the same call where the method allows.

Needs CUDA, torch and triton; skips without them. On the GPU machine:
`PYTHONPATH=. python3 -m pytest -s tests/gpu/test_real_code_on_gpu.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.git_repo import commit_all
from tests.gpu.conftest import needs_cuda_torch_triton

REPO = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT_S = 300
BUDGET = "0.5"  # --gpuperf-budget; the hard limit is 10 x that, at least 5 s

OPS = '''\
import torch
import triton
import triton.language as tl

N = 32 << 20  # 128 MiB of fp32: ~60-80 us a pass on an H100/H200


def masked_mean(x, threshold):
    """A data-dependent op: a boolean mask (its size is read back on the host) and .item()."""
    kept = x[x > threshold]
    return kept.sum().item() / max(kept.numel(), 1)


def fresh_output(x):
    """Allocates its output every call (the caching allocator hands the block back)."""
    return torch.mul(x, 2.0)


def two_streams(x, y, side):
    """Half the work on a side stream, joined back to the current one."""
    current = torch.cuda.current_stream()
    side.wait_stream(current)
    with torch.cuda.stream(side):
        a = x * 2.0
    b = y * 3.0
    current.wait_stream(side)
    a.record_stream(current)
    return a + b


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (512, 1024, 4096) for w in (4, 8)],
    key=["n"],
)
@triton.jit
def scale_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask) * 2.0, mask=mask)


def tuned_scale(src, dst):
    n = src.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](src, dst, n)
'''

TESTS = """\
import json
import os

import torch
import triton.testing

import ops

N = ops.N
TRUTH = {}


def _truth(name, fn):
    TRUTH[name] = triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median") * 1e-3
    with open(os.environ["TRUTH_JSON"], "w") as file:
        json.dump(TRUTH, file)


def test_item(gpu_bench):
    x = torch.rand(N, device="cuda")
    expected = ops.masked_mean(x, 0.5)
    gpu_bench.run(lambda: ops.masked_mean(x, 0.5), reads=(x,), name="masked_mean")
    assert abs(ops.masked_mean(x, 0.5) - expected) < 1e-3
    _truth("masked_mean", lambda: ops.masked_mean(x, 0.5))


def test_allocates(gpu_bench):
    x = torch.rand(N, device="cuda")
    gpu_bench.run(lambda: ops.fresh_output(x), bytes=8 * N, name="fresh_output")
    _truth("fresh_output", lambda: ops.fresh_output(x))


def test_two_streams(gpu_bench):
    x, y = torch.rand(N, device="cuda"), torch.rand(N, device="cuda")
    side = torch.cuda.Stream()
    gpu_bench.run(lambda: ops.two_streams(x, y, side), bytes=5 * 4 * N, name="two_streams")
    torch.testing.assert_close(ops.two_streams(x, y, side), 2 * x + 3 * y)
    _truth("two_streams", lambda: ops.two_streams(x, y, side))


def test_in_place(gpu_bench):
    x = torch.rand(N, device="cuda")
    x0 = x.clone()
    gpu_bench.run(lambda: x.add_(1.0), reads=(x,), writes=(x,), name="add_")
    torch.testing.assert_close(x, x0 + 1.0)  # one application, however many calls


def test_autotuned(gpu_bench):
    src = torch.rand(N, device="cuda")
    dst = torch.empty_like(src)
    gpu_bench.run(lambda: ops.tuned_scale(src, dst), bytes=8 * N, name="tuned_scale")
    torch.testing.assert_close(dst, 2 * src)
    _truth("tuned_scale", lambda: ops.tuned_scale(src, dst))


def test_setup_that_waits(gpu_bench):
    x = torch.rand(N, device="cuda")
    gpu_bench.run(lambda: x.mul(2.0), bytes=8 * N, name="blocking_setup",
                  setup=torch.cuda.synchronize)
"""


def _repo(root: Path) -> Path:
    root.mkdir()
    (root / "ops.py").write_text(OPS)
    (root / "test_ops.py").write_text(TESTS)
    (root / "pytest.ini").write_text("[pytest]\n")
    commit_all(root, "the ops")
    return root


def _pytest(repo: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    env["TRUTH_JSON"] = str(repo / "truth.json")
    env["GPUPERF_CACHE_DIR"] = str(repo.parent / "cache")
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "-p", "no:cacheprovider",
         "-rxXf", "--gpuperf-backend=cuda", f"--gpuperf-budget={BUDGET}",
         "--gpuperf-json=report.json", *args],
        cwd=repo, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
    )  # fmt: skip
    wall_s = time.monotonic() - began
    report = json.loads((repo / "report.json").read_text())
    return done, report, wall_s


def _rows(report: dict) -> dict[str, dict]:
    return {row["measurement"]["name"]: row for row in report["results"]}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    needs_cuda_torch_triton()
    return _repo(tmp_path_factory.mktemp("real-code") / "user")


def test_each_real_code_case_is_measured_or_refused_in_one_line(repo):
    done, report, wall_s = _pytest(repo, "--gpuperf")
    print(done.stdout[-6000:])
    rows = _rows(report)
    truth = json.loads((repo / "truth.json").read_text())
    # .item() and a boolean mask: timed as it runs, within its bound, the method named
    item = rows["masked_mean"]["measurement"]
    assert item["queue_method"].startswith("as-it-runs"), item["queue_method"]
    # allocation each call, two streams, autotune: kept ahead as kernels are
    for name in ("fresh_output", "two_streams", "tuned_scale"):
        method = rows[name]["measurement"]["queue_method"]
        assert not method.startswith("as-it-runs"), (name, method)
    # the plugin's cold time against do_bench's (warm L2 between its calls): same call,
    # a cold pass at 128-256 MiB is never faster, and within 10% of it
    for name in ("fresh_output", "two_streams", "tuned_scale", "masked_mean"):
        ours, theirs = rows[name]["measurement"]["time_s"], truth[name]
        print(f"{name}: gpuperf {ours * 1e6:.1f} us, do_bench {theirs * 1e6:.1f} us")
        assert 0.9 * theirs < ours < 1.25 * theirs, (name, ours, theirs)
    assert "in_place" in rows["add_"]["measurement"]["extra"]
    tests = {t["test_id"].split("::")[-1]: t for t in report["tests"]}
    assert tests["test_setup_that_waits"]["outcome"] == "failed"
    assert "setup= waits for the device" in done.stdout
    assert "Traceback" not in done.stdout
    assert wall_s < 240, wall_s


def test_the_ab_of_a_callable_that_calls_item_ends_within_its_bound(repo):
    # the pull-request gate that hung for 170 s on a 4 s budget: now decided, or one line
    (repo / "ops.py").write_text(OPS.replace("kept.sum().item()", "kept.sum().item() + 0.0"))
    commit_all(repo, "an equivalent edit of the op")
    done, report, wall_s = _pytest(repo, "--gpuperf", "--gpuperf-compare=HEAD~1", "-k", "test_item")
    print(done.stdout[-4000:])
    (row,) = report["results"]
    state = row["verdict"]["comparison"]["state"]
    assert state in ("pass", "inconclusive"), state
    assert row["measurement"]["queue_method"].startswith("as-it-runs")
    assert wall_s < 120, wall_s


HANGS = """\
import time

import torch


def test_hangs(gpu_bench):
    x = torch.rand(1 << 24, device="cuda")
    calls = [0]

    def op():
        calls[0] += 1
        y = x * 2.0
        while calls[0] >= 20:  # a wait for a flag no one sets
            time.sleep(0.1)
        return y

    gpu_bench.run(op, bytes=8 * x.numel(), name="hangs")
"""


def test_a_call_that_never_returns_ends_at_the_limit_and_once_more(repo):
    # the hard limit is checked after every call; a call that never returns is stopped by the
    # alarm (engine/overdue.py): the 5 s limit, then 5 s more (--gpuperf-kernel-timeout=1 is
    # shorter), after the first calls
    (repo / "test_hangs.py").write_text(HANGS)
    done, report, wall_s = _pytest(repo, "--gpuperf", "--gpuperf-kernel-timeout=1", "test_hangs.py")
    print(done.stdout[-3000:])
    (test,) = report["tests"]
    assert test["outcome"] == "xfailed", test
    assert test["error"].startswith(
        "MeasurementTimeout: hangs: not measured: a call of the work did not return"
    )
    assert "Traceback" not in done.stdout
    assert wall_s < 60, wall_s
