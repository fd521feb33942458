"""Real performance commits as the truth for the A/B gate (issue 54): does
`--gpuperf-compare` say what the commit did, in both directions?

Each commit of COMMITS is a pull request of Liger-Kernel's public history that changed a
Triton op runnable on an H100/H200. For each, on the GPU machine:

1. the gate: a scratch git repository (under a temporary folder) vendors the parent's
   src/liger_kernel under vendor/ with the op's test (tests/gpu/real_ops/test_commit_*.py),
   then the commit's, then the parent's again (the revert). `pytest --gpuperf
   --gpuperf-compare=HEAD~1` runs at the commit (head = the commit, base = its parent) and at
   the revert (head = the parent, base = the commit), each a process with a hard timeout;
2. the truth, measured apart from the plugin: one process loads both revisions under module
   sets of their own (the test module imported twice, each time against one vendor folder,
   the library's modules swapped in sys.modules around each side's timing) and times each
   side's callable with `triton.testing.do_bench` (median), interleaved A B B A ... over
   --rounds rounds (at least 8); the ratio is the geometric mean of the rounds' ratios, with
   its 95% t-interval;
3. one row per commit and direction: the truth's ratio (head time / base time) and interval,
   the gate's state, ratio and interval, and whether they agree (`agreement`).

The GPU machine has no network and no git mirror, so the revisions are exported here first,
into .realops/ (gitignored), which the lead carries along:

    PYTHONPATH=. python3 bench/real_commits.py prepare [--mirror DIR] [--wheels /tmp/whl]
    PYTHONPATH=. python3 bench/real_commits.py run --out DIR [--commits b7025a70,...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab import REPO_ROOT
from lab.children import run as run_command
from lab.cli import bounded_processes, scratch_out, time_left
from lab.projects import CORPUS, commit_all, corpus_project, vendor
from lab.pytest_runs import first_line, plugin_env, run_test_file
from lab.runs import write_json
from lab.tables import text_table

PACKAGE = "liger_kernel"
MIRROR = Path("/work/.mirror/linkedin+Liger-Kernel/repo")
REALOPS = REPO_ROOT / ".realops"
DEFAULT_THRESHOLD = 0.005  # the A/B threshold when a report gives none (docs/ci.md)


@dataclass(frozen=True)
class Commit:
    name: str
    base: str  # the parent, as git names it in the mirror
    head: str  # the commit (or the commit with the fix it needs to compile)
    test: str  # the op's test in tests/gpu/real_ops/
    title: str


COMMITS = (
    Commit("b7025a70", "b7025a70~1", "b7025a70", "test_commit_fused_add_rms_norm_bwd.py",
           "Improve bwd kernel for fused_add_rms_norm (#1187)"),
    Commit("65de9582", "65de9582~1", "65de9582", "test_commit_dyt_fwd.py",
           "perf(dyt): enable triton.autotune for DyT forward and backward (#1208)"),
    Commit("8832b2e7", "8832b2e7~1", "37c91c0e", "test_commit_cross_entropy_fwd.py",
           "perf(ce): hardware exp2 (#1266), with 37c91c0e's constexpr fix (#1275)"),
    Commit("0b93bc94", "0b93bc94~1", "0b93bc94", "test_commit_cross_entropy_fwd.py",
           "perf(ce): dtype-aware num_warps, Blackwell-gated (#1267)"),
)  # fmt: skip


@dataclass(frozen=True)
class Truth:
    """head time / base time, its 95% interval [low, high], and the rounds behind it."""

    ratio: float
    low: float
    high: float
    rounds: int

    def reversed(self) -> Truth:
        return Truth(1 / self.ratio, 1 / self.high, 1 / self.low, self.rounds)


def truth_from_times(base_ms: list[float], head_ms: list[float]) -> Truth:
    """The rounds' ratios (head / base, one per round) as a geometric mean and its 95%
    t-interval: the rounds are the independent repeats, the timing inside one do_bench is
    not."""
    from scipy import stats

    logs = [math.log(h / b) for b, h in zip(base_ms, head_ms, strict=True)]
    center = statistics.fmean(logs)
    half = 0.0
    if len(logs) > 1:
        half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return Truth(math.exp(center), math.exp(center - half), math.exp(center + half), len(logs))


def expected_states(truth: Truth, threshold: float, noise: float = 0.0) -> tuple[set[str], bool]:
    """The A/B states that agree with the truth, and whether the truth is clear enough to
    ask for one. `noise` is the gate's own resolution (the half-width of its ratio interval):
    regressed where the truth's whole interval lies beyond 1 + threshold + noise, improved
    where it lies below 1 - threshold - noise, pass where it lies within 1 +- (threshold -
    noise); anywhere else the truth is grey, and pass, inconclusive, or the verdict of a side
    the truth's interval reaches past the threshold all agree."""
    if truth.low > 1 + threshold + noise:
        return {"regressed"}, True
    if truth.high < 1 - threshold - noise:
        return {"improved"}, True
    if truth.low >= 1 - threshold + noise and truth.high <= 1 + threshold - noise:
        return {"pass"}, True
    grey = {"pass", "inconclusive"}
    if truth.high > 1 + threshold:
        grey.add("regressed")
    if truth.low < 1 - threshold:
        grey.add("improved")
    return grey, False


def agreement(state: str, truth: Truth | None, threshold: float, noise: float = 0.0) -> str:
    if truth is None:
        return "no truth"
    allowed, clear = expected_states(truth, threshold, noise)
    if state not in allowed:
        return f"DISAGREES (truth: {' or '.join(sorted(allowed))})"
    return "agrees" if clear else "agrees (grey: the truth is near the threshold)"


# ---- prepare (here, with the mirror) -------------------------------------------------------


def prepare(mirror: Path, out: Path, wheels: Path | None) -> list[dict[str, str]]:
    """Export each commit's and parent's src/liger_kernel into out/<sha12>/ and list them in
    out/commits.json; copy the corpus's wheels to out/../whl when `wheels` is given."""
    listed = []
    for commit in COMMITS:
        entry = asdict(commit)
        for side in ("base", "head"):
            sha = _git(mirror, "rev-parse", f"{getattr(commit, side)}^{{commit}}")[:12]
            target = out / sha
            if not (target / "src" / PACKAGE / "__init__.py").is_file():
                target.mkdir(parents=True, exist_ok=True)
                archive = subprocess.run(
                    ["git", f"--git-dir={mirror}", "archive", sha, f"src/{PACKAGE}"],
                    capture_output=True, check=True,
                )  # fmt: skip
                subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
            entry[f"{side}_sha"], entry[f"{side}_dir"] = sha, sha
        listed.append(entry)
        print(f"{commit.name}: base {entry['base_sha']}, head {entry['head_sha']}", flush=True)
    write_json(str(out / "commits.json"), listed)
    if wheels is not None:
        shelf = out.parent / "whl"
        shelf.mkdir(parents=True, exist_ok=True)
        for wheel in sorted(wheels.glob("*.whl")):
            shutil.copy2(wheel, shelf / wheel.name)
            print(f"wheel {wheel.name} -> {shelf}", flush=True)
    return listed


def _git(mirror: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={mirror}", *args], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{mirror}: git {' '.join(args)}: {first_line(done.stderr)}")
    return done.stdout.strip()


# ---- the truth (a child process on the GPU machine) -----------------------------------------


@dataclass
class Side:
    """One revision in the truth's process: the folder it is imported from, the library's
    modules as it imported them, and the op its test's case() made."""

    folder: Path
    modules: dict[str, Any] = field(default_factory=dict)
    op: Any = None


@contextlib.contextmanager
def active(side: Side) -> Iterator[None]:
    """`side`'s library in sys.modules and its folder first on sys.path, so that an import
    the call makes lazily (Liger 0.8's dispatcher imports its implementations when first
    called) finds its own revision; whatever it imports stays with the side afterwards."""
    _drop_library()
    sys.modules.update(side.modules)
    sys.path.insert(0, str(side.folder))
    try:
        yield
    finally:
        sys.path.remove(str(side.folder))
        side.modules.update(_drop_library())


def load_side(folder: Path, test: Path, tag: str) -> tuple[Any, Side]:
    """The test module imported against the library in `folder`, under a name of its own;
    sys.modules is left without the library."""
    import importlib.util

    side = Side(folder)
    with active(side):
        spec = importlib.util.spec_from_file_location(f"real_commit_case_{tag}", test)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    where = Path(side.modules[PACKAGE].__file__).resolve()
    if not where.is_relative_to(folder.resolve()):
        raise SystemExit(f"side {tag}: {PACKAGE} came from {where}, not {folder}")
    return module, side


def _drop_library() -> dict[str, Any]:
    names = [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]
    return {name: sys.modules.pop(name) for name in names}


def measure_truth(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from triton.testing import do_bench

    test = Path(args.test)
    sides = {}
    for tag, folder in (("base", args.base), ("head", args.head)):
        module, side = load_side(Path(folder), test, tag)
        with active(side):
            side.op = module.case()
            side.op.fn()  # compile, autotune, first-call work
            torch.cuda.synchronize()
        sides[tag] = side
    times: dict[str, list[float]] = {"base": [], "head": []}
    for number in range(args.rounds):
        for tag in ("base", "head") if number % 2 == 0 else ("head", "base"):
            with active(sides[tag]):
                times[tag].append(
                    do_bench(sides[tag].op.fn, warmup=args.warmup_ms, rep=args.rep_ms)
                )
    truth = truth_from_times(times["base"], times["head"])
    files = {f"{tag}_file": side.modules[PACKAGE].__file__ for tag, side in sides.items()}
    return {**asdict(truth), "base_ms": times["base"], "head_ms": times["head"], **files}


# ---- run (on the GPU machine) ---------------------------------------------------------------


@dataclass(frozen=True)
class CommitRow:
    commit: str
    direction: str  # "commit" (head = the commit) or "revert" (head = the parent)
    truth: Truth | None
    state: str
    ratio: float | None
    ratio_ci: tuple[float, float] | None
    threshold: float
    agreement: str
    wall_s: float
    detail: str


def gate_row(commit: str, direction: str, run: Any, truth: Truth | None) -> CommitRow:
    """The A/B's verdict of the one measurement in `run`, against the truth."""
    rows = run.report.rows if run.report is not None else ()
    if not rows:
        why = run.problem or next(iter(run.cases.values()), None)
        detail = why if isinstance(why, str) else (why.message if why else "no test ran")
        state = "timeout" if run.returncode is None else "no verdict"
        said = agreement(state, truth, DEFAULT_THRESHOLD)
        return CommitRow(
            commit, direction, truth, state, None, None, DEFAULT_THRESHOLD, said, run.wall_s, detail
        )
    comparison = rows[0].verdict.comparison
    if comparison is None:
        return CommitRow(commit, direction, truth, "no comparison", None, None,
                         DEFAULT_THRESHOLD, "no comparison", run.wall_s, "")  # fmt: skip
    threshold = comparison.threshold or DEFAULT_THRESHOLD
    ci = tuple(comparison.ratio_ci) if comparison.ratio_ci else None
    noise = (ci[1] - ci[0]) / 2 if ci else 0.0
    return CommitRow(
        commit, direction, truth, comparison.state, comparison.ratio, ci, threshold,
        agreement(comparison.state, truth, threshold, noise), run.wall_s, comparison.detail,
    )  # fmt: skip


def run_commit(entry: dict[str, str], args: argparse.Namespace, work: Path) -> list[CommitRow]:
    src = args.src
    base, head = src / entry["base_dir"], src / entry["head_dir"]
    root = work / entry["name"]
    corpus_project(root, CORPUS / entry["test"], args.budget)
    out = args.out / entry["name"]
    truth = None
    if not args.no_truth:
        truth, why = run_truth(entry, base, head, out, args)
        print(f"{entry['name']}: truth {_truth(truth) if truth else why}", flush=True)
    vendor(base, PACKAGE, root)
    commit_all(root, f"vendor {entry['base_sha']} (the parent)")
    rows = []
    for direction, now in (("commit", head), ("revert", base)):
        vendor(now, PACKAGE, root)  # HEAD: the commit, then its revert; HEAD~1 the other
        commit_all(root, f"{direction}: vendor {now.name}")
        seen = truth if direction == "commit" or truth is None else truth.reversed()
        timeout_s = time_left(args)
        if timeout_s is None:
            why = "the run's --deadline came first"
            row = CommitRow(
                entry["name"], direction, seen, "not run", None, None, DEFAULT_THRESHOLD,
                "not run", 0.0, why,
            )  # fmt: skip
        else:
            ab = ("--gpuperf-compare=HEAD~1",)
            run = run_test_file(root, entry["test"], ab, out, direction, timeout_s)
            row = gate_row(entry["name"], direction, run, seen)
        rows.append(row)
        print(render([row], header=False), flush=True)
    return rows


def run_truth(
    entry: dict[str, str], base: Path, head: Path, out: Path, args: argparse.Namespace
) -> tuple[Truth | None, str]:
    timeout_s = time_left(args)
    if timeout_s is None:
        return None, "not run: the run's --deadline came first"
    command = [
        sys.executable, __file__, "truth", "--test", str(CORPUS / entry["test"]),
        "--base", str(base / "src"), "--head", str(head / "src"), "--rounds", str(args.rounds),
    ]  # fmt: skip
    done = run_command(command, env=plugin_env(), timeout_s=timeout_s, merged=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "truth.log").write_text(done.output)
    if done.returncode is None:
        return None, f"killed at its bound of {timeout_s:.0f} s"
    found = [line for line in done.output.splitlines() if line.startswith("{")]
    if done.returncode or not found:
        last = done.output.strip().splitlines()[-1] if done.output.strip() else "no output"
        return None, f"exit {done.returncode}: {first_line(last)}"
    data = json.loads(found[-1])
    return Truth(data["ratio"], data["low"], data["high"], data["rounds"]), f"{done.wall_s:.0f} s"


def _truth(truth: Truth | None) -> str:
    if truth is None:
        return "-"
    return f"{truth.ratio:.4f} [{truth.low:.4f}, {truth.high:.4f}]"


def render(rows: list[CommitRow], header: bool = True) -> str:
    cells = [
        (r.commit, r.direction, _truth(r.truth), r.state,
         "-" if r.ratio is None else f"{r.ratio:.4f}",
         "-" if r.ratio_ci is None else f"[{r.ratio_ci[0]:.4f}, {r.ratio_ci[1]:.4f}]",
         f"{r.threshold:.2%}", r.agreement, f"{r.wall_s:.1f}", r.detail[:80])
        for r in rows
    ]  # fmt: skip
    if not header:
        return "  ".join(cells[0])
    names = ("commit", "direction", "truth (head/base)", "gate", "gate ratio", "gate interval",
             "threshold", "agreement", "wall s", "why")  # fmt: skip
    return text_table(names, cells)


def summary(rows: list[CommitRow]) -> str:
    agreed = sum(r.agreement.startswith("agrees") for r in rows)
    grey = sum("grey" in r.agreement for r in rows)
    return f"{agreed} of {len(rows)} directions agree with the truth ({grey} grey)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="export the revisions from the git mirror")
    prep.add_argument("--mirror", type=Path, default=MIRROR)
    prep.add_argument("--out", type=Path, default=REALOPS / "liger")
    prep.add_argument("--wheels", type=Path, default=None, help="copy *.whl to .realops/whl")
    run = commands.add_parser("run", help="the gate and the truth, on the GPU machine")
    run.add_argument("--src", type=Path, default=REALOPS / "liger")
    run.add_argument("--commits", default="", help="comma-separated names (default: all)")
    run.add_argument("--rounds", type=int, default=8)
    run.add_argument("--no-truth", action="store_true", help="the gate alone")
    bounded_processes(run, budget=0.5)
    truth = commands.add_parser("truth", help="(internal) both revisions in one process")
    truth.add_argument("--test", required=True)
    truth.add_argument("--base", required=True)
    truth.add_argument("--head", required=True)
    truth.add_argument("--rounds", type=int, default=8)
    truth.add_argument("--warmup-ms", type=float, default=25.0)
    truth.add_argument("--rep-ms", type=float, default=100.0)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.mirror, args.out.resolve(), args.wheels)
        return 0
    if args.rounds < 8:
        parser.error("--rounds: at least 8")
    if args.command == "truth":
        print(json.dumps(measure_truth(args)), flush=True)
        return 0
    listing = args.src / "commits.json"
    if not listing.is_file():
        parser.error(f"{listing}: not there; run `bench/real_commits.py prepare` first")
    entries = json.loads(listing.read_text())
    wanted = set(filter(None, args.commits.split(",")))
    unknown = wanted - {e["name"] for e in entries}
    if unknown:
        parser.error(f"--commits: unknown {', '.join(sorted(unknown))}")
    args.src = args.src.resolve()
    work = scratch_out(args, "real-commits")
    rows = []
    for entry in entries:
        if not wanted or entry["name"] in wanted:
            rows += run_commit(entry, args, work)
            write_json(str(args.out / "rows.json"), [asdict(row) for row in rows])
    write_json(str(args.out / "rows.json"), [asdict(row) for row in rows])
    print("\n" + render(rows))
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
