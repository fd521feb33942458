"""A callable's "same code" on a real GPU (issue 54): a torch op repeated as many times as a
conftest.py fixture says, in a throwaway git repository. The test module never imports the
conftest, so before, a pull request that made the fixture say 3 instead of 2 (a 1.5x slower
callable) read "same code: not timed" and passed, with the stored baseline switched off.
Now conftest.py is compared (it defines a fixture the test uses, and ran), the base body gets
the fixture's value at the base revision, and the pair regresses.

Each inner pytest is a separate process; the base is the commit before the pull request's
(`--gpuperf-compare=HEAD~1`). Needs CUDA and torch; skips without them. Run on the GPU
machine: `PYTHONPATH=. python3 -m pytest -s tests/gpu/test_callable_same_code_on_gpu.py`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.git_repo import commit_all, git

REPO = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT_S = 900

CONFTEST = """\
import pytest


@pytest.fixture
def repeats():
    return {repeats}
"""

TEST_TORCH = """\
import torch


def test_torch_add(gpu_bench, repeats):
    n = 32 << 20
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    c = torch.empty_like(a)

    def op():
        for _ in range(repeats):
            torch.add(a, b, out=c)

    gpu_bench.run(op, bytes=12 * n, name="add")
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
"""


def _needs_cuda_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch (pip install torch)")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU through torch (torch.cuda.is_available() is False)")


def _run(root: Path) -> tuple[int, str, dict]:
    report = root / "report.json"
    report.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "-p", "no:cacheprovider",
         "--gpuperf", "--gpuperf-backend=cuda", "--gpuperf-compare=HEAD~1",
         f"--gpuperf-json={report}", "-q", "-v"],
        cwd=root, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    document = json.loads(report.read_text()) if report.exists() else {}
    return proc.returncode, output, document


def _comparison(document: dict) -> dict:
    results = document.get("results", [])
    assert len(results) == 1, document
    return results[0]["verdict"]["comparison"] or {}


@pytest.mark.gpu
def test_a_fixture_in_conftest_that_makes_a_torch_op_slower_fails_the_ab(tmp_path, capsys):
    _needs_cuda_torch()
    root = tmp_path / "project"
    root.mkdir()
    (root / "conftest.py").write_text(CONFTEST.format(repeats=2))
    (root / "test_torch_op.py").write_text(TEST_TORCH)
    (root / "README").write_text("a project\n")
    commit_all(root, "base")
    with capsys.disabled():
        # 1. a pull request that changes no file the test uses: the same code, not timed, the
        # conftest among the files compared
        (root / "README").write_text("a project, described\n")
        git(root, "commit", "-qam", "readme")
        code, output, document = _run(root)
        comparison = _comparison(document)
        assert code == 0, output[-4000:]
        assert comparison["state"] == "unchanged", comparison
        compared = {f["path"]: f["ways"] for f in comparison["compared_files"]}
        assert "fixtures" in compared.get("conftest.py", []), compared
        assert comparison["incomplete"] == "", comparison
        print(f"\nunrelated edit: {document['summary']['line']}; compared {compared}")

        # 2. the fixture says 3: the callable repeats the op 1.5 times as often
        (root / "conftest.py").write_text(CONFTEST.format(repeats=3))
        git(root, "commit", "-qam", "three adds a call")
        code, output, document = _run(root)
        comparison = _comparison(document)
        print(f"1.5x slower: {comparison.get('state')} {comparison.get('ratio')}")
        for line in output.splitlines():
            if "A/B regressed" in line or line.startswith(("  pairs:", "  code:")):
                print(line)
        assert code == 1, output[-4000:]
        assert comparison["state"] == "regressed", comparison
        assert comparison["changed_files"] == ["conftest.py"], comparison
        assert 1.3 < comparison["ratio"] < 1.7, comparison  # 3 adds against 2
