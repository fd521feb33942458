"""A/B for a Python callable on a real GPU (issue 44): a user-style repository with its own
Triton kernel (`mykern.py`) measured through `gpu_bench.run`, and a torch op. The pull
request makes the Triton kernel read 3% more (an extra masked load of a slice 3% of the
input); under --gpuperf-compare the callable's base is the Triton kernel as committed before,
loaded as other module objects, and the pair regresses at 64M floats (~128 us) and never passes
at 16M (~34 us), where the spread between captures often leaves +1.5% of time undecided at the
default budget (docs/benchmarks.md, "A/B of Python callables": 4 of 11 caught, 7 undecided,
none passed). Unchanged code is "same
code", not timed; an edit of a module the test does not import is the same code too; an
unrelated edit inside the launcher module is timed and does not regress.

Each inner pytest is a separate process in a throwaway git repository; the base is the
commit before the pull request's (`--gpuperf-compare=HEAD~1`), as CI compares with its base
branch. Needs CUDA, torch and triton; skips without them. Run on the GPU machine:
`PYTHONPATH=. python3 -m pytest -s tests/gpu/test_callable_ab_on_gpu.py` (with
`CALLABLE_AB_REPEATS=20` for the issue's counts: 20 separate runs of each case).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.git_repo import commit_all, git
from tests.gpu.conftest import needs_cuda_torch_triton

REPO = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT_S = 1800
# Runs of steps 2 and 3 (each a separate pytest process): the issue asks for >= 20 of each;
# CALLABLE_AB_REPEATS=20 on the GPU machine.
REPEATS = int(os.environ.get("CALLABLE_AB_REPEATS", "1"))

MYKERN = """\
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, extra, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(src + offs, mask=mask)
{extra_load}    tl.store(dst + offs, x, mask=mask)


def copy(src, dst, extra):
    n = src.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](src, dst, extra, n, BLOCK=1024)
{unrelated}"""

# The pull request: 3% more reads (a slice of zeros, so the output does not change).
EXTRA_LOAD = """\
    e = tl.load(extra + offs, mask=offs < n * 3 // 100, other=0.0)
    x = x + e
"""

TEST_TRITON = """\
import pytest
import torch

import mykern


@pytest.mark.parametrize("n", [16 << 20, 64 << 20])  # ~30 us and ~120 us on an H100/H200
def test_triton_copy(gpu_bench, n):
    src = torch.rand(n, device="cuda")
    dst = torch.empty_like(src)
    extra = torch.zeros_like(src)
    gpu_bench.run(lambda: mykern.copy(src, dst, extra), bytes=8 * n, name="copy")
    torch.cuda.synchronize()
    assert torch.equal(dst, src)
"""

TEST_TORCH = """\
import torch


def test_torch_add(gpu_bench):
    n = 32 << 20
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    c = torch.empty_like(a)
    gpu_bench.run(lambda: torch.add(a, b, out=c), bytes=12 * n, name="add")
"""


def _write_kernel(root: Path, *, extra: bool = False, unrelated: str = "") -> None:
    text = MYKERN.format(extra_load=EXTRA_LOAD if extra else "", unrelated=unrelated)
    (root / "mykern.py").write_text(text)


def _project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _write_kernel(root)
    (root / "unrelated.py").write_text("VALUE = 1\n")
    (root / "test_triton_copy.py").write_text(TEST_TRITON)
    (root / "test_torch_op.py").write_text(TEST_TORCH)
    commit_all(root, "base")
    return root


def _run(root: Path, *options: str) -> tuple[int, str, dict]:
    report = root / "report.json"
    report.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "-p", "no:cacheprovider",
         "--gpuperf", "--gpuperf-backend=cuda", "--gpuperf-compare=HEAD~1",
         f"--gpuperf-json={report}", "-q", *options],
        cwd=root, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    document = json.loads(report.read_text()) if report.exists() else {}
    return proc.returncode, output, document


def _states(document: dict) -> dict[str, dict]:
    return {
        row["test_id"]: row["verdict"]["comparison"] or {} for row in document.get("results", [])
    }


def _said(comparison: dict) -> str:
    ratio = comparison.get("ratio")
    shown = f" {ratio:.4f}" if isinstance(ratio, float) else ""
    return f"{comparison.get('state')}{shown} {comparison.get('detail') or ''}".rstrip()


def _instructions(widths: str) -> int:
    """The count in a widths phrase: "2 b128 + 4 b32" -> 6."""
    return sum(int(count) for count in re.findall(r"(\d+) b\d+", widths))


def _pull_request(root: Path, message: str) -> None:
    git(root, "commit", "-qam", message)


@pytest.mark.gpu
def test_a_triton_callable_reading_3_percent_more_regresses_in_the_ab(tmp_path, capsys):
    needs_cuda_torch_triton()
    root = _project(tmp_path / "project")
    with capsys.disabled():
        # 1. a pull request that changes nothing the tests import: the same code, not timed
        (root / "unrelated.py").write_text("VALUE = 2  # an unrelated edit\n")
        _pull_request(root, "unrelated edit")
        code, output, document = _run(root)
        states = _states(document)
        assert code == 0, output[-4000:]
        assert states and all(c.get("state") == "unchanged" for c in states.values()), states
        print(f"\nunrelated module edited: {document['summary']['line']}")

        # 2. an unrelated line inside the launcher module: timed, and no regression
        _write_kernel(root, unrelated="\n\ndef unused():\n    return 0\n")
        _pull_request(root, "unrelated line in mykern.py")
        false_alarms = 0
        for _ in range(REPEATS):
            code, output, document = _run(root)
            for test_id, comparison in _states(document).items():
                if "triton" not in test_id:
                    assert comparison["state"] == "unchanged", (test_id, comparison)
                    continue
                false_alarms += comparison["state"] == "regressed"
                print(f"unrelated line: {test_id}: {_said(comparison)}")
        print(f"unrelated line: {false_alarms} false alarms in {2 * REPEATS} comparisons")
        assert false_alarms == 0, output[-4000:]

        # 3. the Triton kernel reads 3% more: the A/B regresses at 64M, confirmed; at 16M it
        # regresses or stays undecided (reported), and never passes
        _write_kernel(root, extra=True, unrelated="\n\ndef unused():\n    return 0\n")
        _pull_request(root, "copy: read 3% more")
        caught, missed = 0, []
        for _ in range(REPEATS):
            code, output, document = _run(root)
            states = _states(document)
            triton = {k: v for k, v in states.items() if "triton" in k}
            assert len(triton) == 2, states
            for test_id, comparison in triton.items():
                assert comparison["changed_files"] == ["mykern.py"], comparison
                print(f"reads +3%: {test_id}: {_said(comparison)}")
                if str(64 << 20) in test_id:
                    caught += comparison["state"] == "regressed"
                elif comparison["state"] not in ("regressed", "inconclusive"):
                    missed.append((test_id, comparison["state"]))
        print(f"reads +3%: {caught} of {REPEATS} comparisons at 64M regressed")
        assert caught >= 0.95 * REPEATS, output[-4000:]
        assert not missed, missed  # at 16M: regressed or undecided, never passed or improved
        for comparison in triton.values():
            assert 1.003 < comparison["ratio"] < 1.06, comparison  # reads +3%: time ~+1.5%
        torch_op = [v for k, v in states.items() if "torch" in k]
        assert torch_op and torch_op[0]["state"] == "unchanged", states
        # the failure names the Triton kernel's compiled facts, head against base
        assert "triton copy_kernel: registers " in output, output[-4000:]
        # ... with its occupancy and its global loads and stores by width (from the PTX):
        # the pull request's extra load adds load instructions to the base's
        facts = re.search(
            r"triton copy_kernel: registers \d+ -> \d+, spills \d+ -> \d+, shared memory "
            r"\d+ -> \d+ bytes, occupancy \d+% -> \d+%[^,]*, loads (.+?) -> (.+?), stores "
            r"[\w +]+ -> [\w +]+",
            output,
        )
        assert facts, output[-4000:]
        assert _instructions(facts[2]) > _instructions(facts[1]), facts[0]
        for line in output.splitlines():
            if "A/B regressed" in line or line.startswith(("  pairs:", "  code:", "  explain:")):
                print(line)
        print(f"timing: {json.dumps(document.get('timing'))}")
