"""`gpuperf bisect GOOD BAD -- PYTEST_ARGS` on the simulated device, end to end:
a user's git project whose kernel's `gpuperf-sim: efficiency=` directive steps at hidden
commits; each probe is a separate pytest process through the plugin (--gpuperf-head against
--gpuperf-compare=GOOD). One step among 40 commits, two steps, a commit that does not build,
no step, and every bad argument (one line, exit 2, nothing written)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.git_repo import git

REPO = Path(__file__).resolve().parents[2]
THRESHOLD = 0.005

CONFTEST = """\
from pathlib import Path

from pytest_gpuperf import simulate


@simulate.model(Path(__file__).parent / "kernels" / "vadd.hip", "vector_add")
def vector_add(args, launch):
    a, b, c, n = args
    count = min(n, launch.threads_x)
    c[:count] = a[:count] + b[:count]
"""

TEST_MODULE = """\
import numpy as np

N = 1 << 20


def test_add(gpu_bench):
    kernel = gpu_bench.kernel("kernels/vadd.hip", "vector_add")
    rng = np.random.default_rng(0)
    a = rng.random(N, dtype=np.float32)
    b = rng.random(N, dtype=np.float32)
    da, db, dc = gpu_bench.to_device(a), gpu_bench.to_device(b), gpu_bench.empty(N)
    gpu_bench(kernel, grid=N // 256, block=256, args=(da, db, dc, N), reads=(a, b), writes=(a,))
    np.testing.assert_allclose(gpu_bench.from_device(dc, np.float32, N), a + b, rtol=1e-6)
"""

KERNEL = """\
#include "gpuperf.h"
#include "common.h"
#define REVISION {revision}
// gpuperf-sim: efficiency={efficiency}
GPUPERF_KERNEL void vector_add(const float* a, const float* b, float* c, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];{broken}
}}
"""


def make_project(root: Path, plan: list[tuple[str, float, str]]) -> list[str]:
    """GOOD, then one commit per (what, efficiency, subject): what is "kernel" (the kernel
    file with this efficiency), "broken" (the kernel, not compiling), "header" (only the
    header it includes) or "docs". Returns the shas, GOOD first."""
    (root / "kernels").mkdir(parents=True)
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_vadd.py").write_text(TEST_MODULE)
    (root / "README.md").write_text("# kernels\n")
    (root / "kernels" / "common.h").write_text("#define COMMON 0\n")

    def kernel(revision: int, efficiency: float, broken: str = "") -> None:
        text = KERNEL.format(revision=revision, efficiency=efficiency, broken=broken)
        (root / "kernels" / "vadd.hip").write_text(text)

    kernel(0, 0.70)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "GOOD")
    efficiency = 0.70
    for index, (what, value, subject) in enumerate(plan, start=1):
        if what == "kernel":
            efficiency = value
            kernel(index, efficiency)
        elif what == "broken":
            kernel(index, efficiency, broken="\n    if (i < n) {")
        elif what == "header":
            (root / "kernels" / "common.h").write_text(f"#define COMMON {index}\n")
        else:
            with (root / "README.md").open("a") as readme:
                readme.write(f"section {index}\n")
        git(root, "add", "-A")
        git(root, "commit", "-qm", subject)
    return git(root, "rev-list", "--reverse", "HEAD").split()


def bisect(root: Path, *args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["GPUPERF_CACHE_DIR"] = str(cache)
    env["GPUPERF_LOCK_DIR"] = str(cache / "locks")  # not the machine's: others' runs wait there
    env["GPUPERF_SIM_SEED"] = "4321"
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf.commands", "bisect", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


PYTEST_ARGS = (
    "--",
    "-q",
    "-p",
    "no:cacheprovider",
    "-p",
    "pytest_gpuperf.plugin",
    "--gpuperf-backend=sim",
    "test_vadd.py",
)


@pytest.fixture
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def steps_at(count: int, changes: dict[int, float]) -> list[tuple[str, float, str]]:
    """`count` commits, each editing the kernel; at the commits in `changes` its efficiency
    becomes that value."""
    plan, efficiency = [], 0.70
    for index in range(1, count + 1):
        efficiency = changes.get(index, efficiency)
        plan.append(("kernel", efficiency, f"change {index}"))
    return plan


@pytest.mark.slow
def test_one_step_among_40_commits_is_named_in_at_most_7_probes(tmp_path, cache):
    shas = make_project(tmp_path, steps_at(40, {27: 0.60}))
    done = bisect(
        tmp_path, "HEAD~40", "HEAD", "--budget", "0.02", "--json", "bisect.json",
        *PYTEST_ARGS, cache=cache,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == f"culprit: {shas[27]} change 27"
    assert lines[0].startswith(f"bisect {shas[0][:12]}..{shas[40][:12]}: 40 first-parent commits")
    assert "40 change kernels/vadd.hip, kernels/common.h" in lines[0]
    assert "SIMULATED" in lines[0]
    assert lines[1].split() == [
        "#",
        "commit",
        "ratio",
        "to",
        "GOOD",
        "(95%",
        "CI)",
        "state",
        "subject",
    ]
    report = json.loads((tmp_path / "bisect.json").read_text())
    probes = report["probes"]
    assert len(probes) <= 1 + math.ceil(math.log2(40)) == 7
    progress = [line for line in done.stderr.splitlines() if line.startswith("bisect: probe")]
    assert len(progress) == len(probes)  # one line per probe
    assert report["culprit"] == {"sha": shas[27], "subject": "change 27"}
    assert report["culprit_line"] == lines[-1] and report["simulated"] is True
    by_sha = {p["sha"]: p for p in probes}
    culprit = by_sha[shas[27]]
    assert culprit["state"] == "regressed" and culprit["ratio"] > 1.1
    assert culprit["ratio_ci"][0] > 1 + THRESHOLD
    for probe in probes:  # every probe before the step runs at GOOD's speed
        row = next(
            line for line in lines if line.split()[:2] == [str(probe["number"]), probe["sha"][:12]]
        )
        assert probe["state"] in row
        if shas.index(probe["sha"]) < 27:
            assert probe["state"] in ("modelled", "pass")
    assert report["steps"][0]["before"]["sha"] == shas[26]


@pytest.mark.slow
def test_two_steps_report_the_largest_and_list_the_other(tmp_path, cache):
    shas = make_project(tmp_path, steps_at(32, {9: 0.67, 30: 0.57}))
    done = bisect(
        tmp_path, shas[0], shas[-1], "--budget", "0.02", "--json", "bisect.json",
        *PYTEST_ARGS, cache=cache,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == f"culprit: {shas[30]} change 30"
    other = [line for line in lines if line.startswith("other step:")]
    # 0.70 -> 0.67 streaming efficiency: +4.5% of the streaming time, less of the launch's
    assert len(other) == 1 and other[0].startswith(f"other step: {shas[9][:12]} change 9: 1.0")
    report = json.loads((tmp_path / "bisect.json").read_text())
    assert [s["suspects"][-1]["subject"] for s in report["steps"]] == ["change 30", "change 9"]
    assert report["steps"][0]["ratio"] > report["steps"][1]["ratio"] > 1 + 2 * THRESHOLD


@pytest.mark.slow
def test_a_commit_that_does_not_build_is_skipped_and_named(tmp_path, cache):
    plan = steps_at(24, {17: 0.60})
    plan[11] = ("broken", 0.70, "WIP: change 12 (does not compile)")  # the first midpoint
    shas = make_project(tmp_path, plan)
    done = bisect(tmp_path, "HEAD~24", "HEAD", "--budget", "0.02", *PYTEST_ARGS, cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == f"culprit: {shas[17]} change 17"
    skipped = [line for line in lines if line.startswith("skipped")]
    assert skipped == [
        f"skipped {shas[12][:12]} (does not build): CompileError: {shas[12]}:kernels/vadd.hip:5: "
        "'{' is never closed"
    ]
    row = next(line for line in lines if line.split()[1:2] == [shas[12][:12]])
    assert "does not build" in row and "WIP: change 12" in row
    assert f"{shas[12][:12]} - does not build: CompileError" in done.stderr


@pytest.mark.slow
def test_a_range_without_a_step_names_no_culprit_and_says_why(tmp_path, cache):
    plan = [
        ("kernel", 0.70, "change 1"),
        ("docs", 0.70, "docs 2"),
        ("header", 0.70, "header 3"),
        ("docs", 0.70, "docs 4"),
        ("kernel", 0.72, "change 5"),  # faster (the same speed would be GOOD's model)
    ]
    shas = make_project(tmp_path, plan)
    done = bisect(
        tmp_path, "HEAD~5", "HEAD", "--budget", "0.02", "--json", "bisect.json",
        *PYTEST_ARGS, cache=cache,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("culprit: none (BAD is not slower than GOOD by more than 0.5%")
    report = json.loads((tmp_path / "bisect.json").read_text())
    assert report["culprit"] is None and report["why_none"] in last
    assert len(report["probes"]) == 1  # BAD only: nothing to search
    # the commits that can change the kernel: the kernel file's and its header's, not docs
    assert [c["sha"] for c in report["candidates"]] == [shas[1], shas[3], shas[5]]


@pytest.fixture
def small_project(tmp_path):
    make_project(tmp_path, steps_at(3, {2: 0.6}))
    return tmp_path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nosuchref", "HEAD"), "GOOD: git cannot resolve 'nosuchref' to a commit in"),
        (("HEAD~3", "HEAD~3"), "GOOD and BAD are the same commit"),
        (("HEAD", "HEAD~3"), "is not an ancestor of BAD"),
        (("HEAD~3",), "the following arguments are required: BAD"),
        (("HEAD~3", "HEAD", "--threshold", "lots"), "--threshold: the compare threshold"),
        (("HEAD~3", "HEAD", "--budget", "-1"), "--budget:"),
        (("HEAD~3", "HEAD", "--rounds", "0"), "--rounds: expected 1 to 8 runs per probe"),
        (("HEAD~3", "HEAD", "--json", "kernels"), "--json kernels: is a directory, not a regular"),
        (("HEAD~3", "HEAD", "--", "--gpuperf-budget=3"), "--gpuperf-budget after --: bisect sets"),
        (("HEAD~3", "HEAD", "--", "--gpuperf-compare=HEAD"), "--gpuperf-compare after --"),
    ],
)
def test_bad_arguments_end_with_one_line_and_exit_2(small_project, cache, args, message):
    before = sorted(p.name for p in small_project.iterdir())
    done = bisect(small_project, *args, cache=cache)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("gpuperf bisect: error: ")
    assert message in done.stderr
    assert sorted(p.name for p in small_project.iterdir()) == before  # nothing written


@pytest.mark.parametrize(
    ("pytest_args", "message"),
    [
        (("--no-such-option",), "usage error: "),
        (("-k", "nothing_matches"), "no tests collected"),
        (("README.md",), "ERROR: not found: "),
    ],
)
def test_pytest_arguments_pytest_refuses_end_with_pytests_line(
    small_project, cache, pytest_args, message
):
    args = (*PYTEST_ARGS[:-1], *pytest_args)
    done = bisect(small_project, "HEAD~3", "HEAD", "--json", "b.json", *args, cache=cache)
    assert done.returncode == 2, done.stdout
    lines = [line for line in done.stderr.splitlines() if not line.startswith("bisect: probe")]
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert message in lines[0]
    assert not (small_project / "b.json").exists()


def test_outside_a_git_repository_is_one_line(tmp_path, cache):
    done = bisect(tmp_path, "HEAD~1", "HEAD", cache=cache)
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "is not inside a git work tree: there is no history to bisect"
    )


@pytest.mark.slow
def test_the_culprits_code_change_is_named_against_the_commit_before_it(tmp_path, cache):
    """Each probe carries its commit's code facts (--gpuperf-code-facts; the simulated
    device's are clang-19's for gfx942): the culprit, which added a load, is explained
    against the commit before it, not against GOOD."""
    from tests import toolchains

    toolchains.need("clang-19")
    shas = make_project(tmp_path, steps_at(3, {}))
    # commits 4-6 read a third value (and the directive slows them down): 4 is the culprit
    kernels = tmp_path / "kernels" / "vadd.hip"
    for index in range(4, 7):
        text = KERNEL.format(revision=index, efficiency=0.55, broken="")
        kernels.write_text(
            text.replace("c[i] = a[i] + b[i];", "c[i] = a[i] + b[i] + 0.0f * a[n - 1 - i];")
        )
        git(tmp_path, "commit", "-qam", f"change {index}")
    shas = git(tmp_path, "rev-list", "--reverse", "HEAD").split()
    done = bisect(
        tmp_path, shas[0], shas[-1], "--budget", "0.02", "--json", "bisect.json",
        *PYTEST_ARGS, cache=cache,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == f"culprit: {shas[4]} change 4"
    assert lines[-2] == (
        f"culprit's code, against {shas[3][:12]} change 3: registers 8 -> 10; global loads 2 -> 3 "
        "(b32 2 -> 3)"
    )
    report = json.loads((tmp_path / "bisect.json").read_text())
    code = report["culprit_explain"]["code"]
    assert code["base"]["global_loads"] == {"b32": 2} and code["head"]["global_loads"] == {"b32": 3}
