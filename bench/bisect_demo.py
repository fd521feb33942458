"""Find the commit that made a kernel slower, in a user's repository: `python -m
pytest_gpuperf.bisect` on a throwaway git project whose history holds one real regression.

The project has two kernel files, each `vector_add_more` (kernels/bench_variants.hip: c = a +
b reading EXTRA_PERMILLE per mille more bytes than it declares), a perf test per file and a
history of --commits first-parent commits after GOOD: documentation and Python edits (never
probed), other code objects of the same work (GQ_SALT: the A/A' case, timed), an edit of the
second kernel, one commit whose kernel does not compile (fixed by the next), and at
--culprit the commit that makes `add.hip` read 30 per mille more: 3% more memory traffic
than the 12 bytes per element it moved before. The script runs the bisection from BAD's work
tree and checks that it names that commit.

  PYTHONPATH=. python3 bench/bisect_demo.py --backend sim --out /tmp/bisect   # here
  PYTHONPATH=. python3 bench/bisect_demo.py --backend cuda --out $OUT         # on the H100

Writes bisect.txt (the table and the culprit line), progress.txt (a line per probe),
bisect.json (the bisection's --json) and summary.json (expected culprit, found, probes, wall
time) under --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from lab.children import run
from lab.kernels import KERNEL, kernel_source, vector_add_more_model
from lab.projects import git, write_project
from lab.pytest_runs import NAMED_PLUGIN, plugin_env

from pytest_gpuperf.record.report_reader import read_bisect

CULPRIT_PERMILLE = 30  # 3 n x 30 / 1000 extra floats: 0.36 n bytes over 12 n, 3% more traffic
BROKEN = "float value = (a[i] + b[i];"  # the unclosed ( of the commit that does not build

TEST_MODULE = """\
import numpy as np
import pytest

N = {elements}
EXTRA = 3 * N * 333 // 1000 + 1  # room for the largest EXTRA_PERMILLE


@pytest.mark.parametrize("path", ["kernels/add.hip", "kernels/add2.hip"])
def test_add(gpu_bench, path):
    kernel = gpu_bench.kernel(path, "{kernel}")
    rng = np.random.default_rng(0)
    a = rng.random(N, dtype=np.float32)
    b = rng.random(N, dtype=np.float32)
    da, db = gpu_bench.to_device(a), gpu_bench.to_device(b)
    extra = gpu_bench.to_device(np.zeros(EXTRA, np.float32))
    dc = gpu_bench.empty(N)
    gpu_bench(kernel, grid=(N + 255) // 256, block=256, args=(da, db, dc, extra, N),
              bytes=12 * N)
    np.testing.assert_array_equal(gpu_bench.from_device(dc, np.float32, N), a + b)
"""


def build_project(root: Path, commits: int, culprit: int, elements: int) -> dict[int, str]:
    """The project's history: GOOD (0), then `commits` commits; returns {index: what}."""
    kernels = root / "kernels"
    state = {"add": [0, 1], "add2": [0, 1]}  # [permille, salt]

    def write_kernels() -> None:
        for name, (permille, salt) in state.items():
            (kernels / f"{name}.hip").write_text(kernel_source(permille, salt))

    files = {f"kernels/{name}.hip": kernel_source(*state[name]) for name in state}
    files["conftest.py"] = vector_add_more_model("kernels")
    files["test_kernels.py"] = TEST_MODULE.format(elements=elements, kernel=KERNEL)
    files.update({"README.md": "# a kernel library\n", "tools.py": "VERSION = 0\n"})
    write_project(root, files, "GOOD: two vector_add_more kernels and their perf tests")
    story: dict[int, str] = {}
    for index in range(1, commits + 1):
        if index == culprit:
            state["add"][0] = CULPRIT_PERMILLE
            story[index] = f"add.hip: read {CULPRIT_PERMILLE} per mille more (3% more traffic)"
        elif index == culprit - 6 and culprit > 6:
            story[index] = "add.hip: WIP (does not compile)"
        elif index == culprit - 5 and culprit > 6:
            story[index] = "add.hip: fix the build"
        elif index % 3 == 2:
            state["add"][1] += 1
            story[index] = f"add.hip: refactor (same work, GQ_SALT {state['add'][1]})"
        elif index % 6 == 4:
            state["add2"][1] += 1
            story[index] = f"add2.hip: refactor (GQ_SALT {state['add2'][1]})"
        elif index % 2:
            story[index] = f"docs: README section {index}"
            with (root / "README.md").open("a") as readme:
                readme.write(f"\nsection {index}\n")
        else:
            story[index] = f"tools: version {index}"
            (root / "tools.py").write_text(f"VERSION = {index}\n")
        write_kernels()
        if story[index].endswith("(does not compile)"):
            path = kernels / "add.hip"
            source = path.read_text()
            assert "float value = a[i] + b[i];" in source
            path.write_text(source.replace("float value = a[i] + b[i];", BROKEN))
        git(root, "commit", "-qam", story[index])
    return story


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sim", "cuda", "hip"), default="sim")
    parser.add_argument("--commits", type=int, default=24)
    parser.add_argument("--culprit", type=int, default=17)
    parser.add_argument("--elements", type=int, default=32 * 1024 * 1024)
    parser.add_argument("--budget", default="0.25")
    parser.add_argument("--out", type=Path, required=True)
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bisect-demo-") as scratch:
        root = Path(scratch) / "project"
        story = build_project(root, options.commits, options.culprit, options.elements)
        culprit_sha = git(root, "rev-parse", f"HEAD~{options.commits - options.culprit}")
        env = plugin_env(GPUPERF_CACHE_DIR=str(Path(scratch) / "cache"))
        pytest_args = ["-q", *NAMED_PLUGIN, f"--gpuperf-backend={options.backend}",
                       "test_kernels.py"]  # fmt: skip
        if options.backend != "sim":
            pytest_args.append(f"--gpuperf-require={options.backend}")
        command = [
            sys.executable, "-m", "pytest_gpuperf.bisect",
            f"HEAD~{options.commits}", "HEAD", "--budget", options.budget,
            "--json", str(options.out / "bisect.json"), "--", *pytest_args,
        ]  # fmt: skip
        done = run(command, cwd=root, env=env, timeout_s=3600)
        (options.out / "bisect.txt").write_text(done.stdout)
        (options.out / "progress.txt").write_text(done.stderr)
    print((options.out / "progress.txt").read_text(), end="")
    print((options.out / "bisect.txt").read_text(), end="")
    found = {}
    if (options.out / "bisect.json").is_file():
        found = read_bisect(options.out / "bisect.json")
    named = (found.get("culprit") or {}).get("sha")
    summary = {
        "backend": options.backend, "commits": options.commits, "culprit_index": options.culprit,
        "culprit_expected": culprit_sha, "culprit_found": named, "named": named == culprit_sha,
        "probes": len(found.get("probes", ())), "candidates": len(found.get("candidates", ())),
        "wall_s": round(done.wall_s, 1), "exit_status": done.returncode, "story": story,
        "device": found.get("device"),
    }  # fmt: skip
    (options.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "story"}, indent=2))
    return 0 if summary["named"] else 1


if __name__ == "__main__":
    sys.exit(main())
