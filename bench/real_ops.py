"""Real library ops through every gate (issue 54): the corpus of tests/gpu/real_ops/ run in
scratch repositories, a pytest process per gate, each bounded in wall time.

Per library a git repository is made under a temporary folder (never in this checkout):
commit 1 vendors the OLDER release under vendor/ with the corpus's test file, its conftest
and a pytest.ini (`pythonpath = vendor`, so the test imports the vendored release by its
package name); commit 2 vendors the NEWER release. Torch cannot be vendored at an older
release, so its repository commits the test file as it is, then an edited copy
(TORCH_EDITS: one op does 1.5x the work, one is respelled into an equivalent call).

Then, in order, each a separate pytest process with --gpuperf-json and a hard timeout:

  smoke     plain pytest (one call of each op, outputs checked)
  measure   --gpuperf
  save1-3   --gpuperf-save, three times (the baselines in the scratch repository)
  judge     --gpuperf, judged by those stored baselines
  ab        --gpuperf-compare=HEAD~1 (the newer release against the older, or torch's edit)
  explain   --gpuperf-explain (each measured op, or those --explain-k picks, re-run once
            under ncu after its verdict)

It prints one row per op and gate: the outcome (pass, fail, regressed, improved,
inconclusive, unjudged, refused, skipped, timeout, ...) with its one-line reason where the op
was not measured, the test's wall seconds and the GPU lock its measurements held, then a
summary line. Raw output (each process's log, JSON report and JUnit XML, and rows.json, kept
up to date after every process) goes under --out, a temporary folder by default, never into
the repository. `--deadline S` bounds the whole run: no process starts once less than
lab.cli.MIN_PROCESS_S of it is left, none runs past it, and the gates not run are rows that say so.

    PYTHONPATH=. python3 bench/real_ops.py --liger OLD NEW --flaggems OLD NEW --torch --out DIR

OLD and NEW are wheels (liger_kernel-0.6.5-py3-none-any.whl) or unpacked folders.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab.cli import bounded_processes, scratch_out, time_left
from lab.projects import CORPUS, commit_all, corpus_project, release_name, vendor
from lab.pytest_runs import Case, Run, run_test_file
from lab.runs import write_json
from lab.tables import text_table

# library -> (the package vendored, the corpus's test file)
LIBRARIES = {
    "liger": ("liger_kernel", "test_liger_ops.py"),
    "flaggems": ("flag_gems", "test_flaggems_ops.py"),
    "torch": ("", "test_torch_ops.py"),
}
SAVE = ("--gpuperf-save",)
# (process, its options, the gates its report answers). The explain pass comes last, in a
# process of its own (--gpuperf-explain re-runs each measured op under ncu after its verdict,
# 10-20 s an op on an H200): sharing the judge's process, its cost killed the judge's rows
# with it at the process's bound (2026-11-29). --explain-k picks the ops it profiles.
EXPLAIN = ("--gpuperf", "--gpuperf-explain", "--gpuperf-explain-timeout=60")
PROCESSES = (
    ("smoke", (), ("smoke",)),
    ("measure", ("--gpuperf",), ("measure",)),
    ("save1", SAVE, ("save",)),
    ("save2", SAVE, ("save",)),
    ("save3", SAVE, ("save",)),
    ("judge", ("--gpuperf",), ("judge",)),
    ("ab", ("--gpuperf-compare=HEAD~1",), ("ab",)),
    ("explain", EXPLAIN, ("explain",)),
)
GATE_NAMES = ("smoke", "measure", "save", "judge", "explain", "ab")
# torch's pull request: (what the test file says, what the edit makes of it)
TORCH_EDITS = (
    (
        "    return F.silu(gate) * up\n",
        "    product = F.silu(gate) * up\n"
        "    half = gate.shape[0] // 2\n"
        "    F.silu(gate[:half]) * up[:half]  # the edit: half of the work once more\n"
        "    return product\n",
    ),
    (
        "    return torch.unique(ids, return_counts=True)\n",
        "    return ids.unique(return_counts=True)  # the edit: the same op, as a method\n",
    ),
)
BASELINE_WORDS = {"within-noise": "pass", "no-baseline": "no baseline"}


@dataclass(frozen=True)
class OpRow:
    library: str
    op: str
    gate: str
    outcome: str
    detail: str
    wall_s: float | None
    lock_s: float | None


def edited(text: str, edits: tuple[tuple[str, str], ...] = TORCH_EDITS) -> str:
    """`text` with each edit made; an edit whose text is not there exactly once ends the
    script with one line (the test file changed under the bench)."""
    for old, new in edits:
        if text.count(old) != 1:
            raise SystemExit(f"{CORPUS.name}: expected {old.strip()!r} once in the test file")
        text = text.replace(old, new)
    return text


def build_repository(
    root: Path, library: str, releases: tuple[Path, Path] | None, budget_s: float
) -> None:
    """The scratch repository: the older release (or torch's test as it is), then the newer
    (or torch's edit) as HEAD."""
    package, test_name = LIBRARIES[library]
    corpus_project(root, CORPUS / test_name, budget_s)
    if releases is None:
        commit_all(root, "the ops as they are")
        test = root / test_name
        test.write_text(edited(test.read_text()))
        commit_all(root, "swiglu does 1.5x the work; unique respelled")
        return
    old, new = releases
    vendor(old, package, root)
    commit_all(root, f"vendor {release_name(old, package)}")
    vendor(new, package, root)
    commit_all(root, f"vendor {release_name(new, package)}")


def outcome(gate: str, case: Case | None, rows: list[Any]) -> tuple[str, str]:
    """(outcome, the one line that says why or what was measured) of one op at one gate,
    from its JUnit case and its report rows (record.verdict.Row)."""
    if not rows:
        if case is None:
            return "missing", "not in the run's JUnit report"
        if case.status == "skipped":
            return "skipped", case.message
        if case.status in ("failed", "error"):
            refused = "refus" in case.message.lower()
            return ("refused" if refused else "fail"), case.message
        return ("pass", "") if gate == "smoke" else ("unmeasured", "passed without a measurement")
    row = rows[0]
    verdict, measured = row.verdict, row.measurement
    if verdict.status == "unjudged":
        return "unjudged", case.message if case else "its test failed"
    shown = f"{measured.time_s * 1e6:.1f} us, {measured.efficiency:.1%} of peak"
    if measured.queue_method:
        shown += f", {measured.queue_method}"
    if gate.startswith("save"):
        save = verdict.save
        saved = "saved" if save and save.saved else f"not saved ({save.why_not if save else '-'})"
        return verdict.status, f"{saved}; {shown}"
    if gate == "judge":
        check = verdict.baseline
        said = BASELINE_WORDS.get(check.outcome, check.outcome)
        judged = check.delta is not None and check.allowance is not None
        delta = f"{check.delta:+.2%} (allowance {check.allowance:.2%})" if judged else ""
        return said, f"{delta}; {shown}".strip("; ")
    if gate == "ab":
        comparison = verdict.comparison
        if comparison is None:
            return "unjudged", "no comparison in the report"
        ratio = f"ratio {comparison.ratio:.4f}" if comparison.ratio else comparison.detail
        if comparison.ratio_ci:
            ratio += f" [{comparison.ratio_ci[0]:.4f}, {comparison.ratio_ci[1]:.4f}]"
        return comparison.state, ratio
    if gate == "explain":
        traffic = (verdict.explain or {}).get("traffic") or {}
        check = (verdict.explain or {}).get("bytes_check") or {}
        if traffic and not traffic.get("problem"):
            return "explained", (traffic.get("lines") or [check.get("line", "")])[0] or shown
        return "unexplained", traffic.get("problem") or "not profiled"
    return verdict.status, shown


def op_rows(library: str, gate: str, run: Run, ops: list[str]) -> list[OpRow]:
    """One row per op of `ops` (test function names) at this gate; a process killed at its
    bound, or one that left no case at all, gives each op that line."""
    rows = []
    for name in ops or sorted(run.cases):
        case = run.cases.get(name)
        measured = run.rows_of(name)
        if run.returncode is not None and case is None and not measured and run.cases:
            rows.append(OpRow(library, name, gate, "not run", "not selected (-k, --explain-k)",
                              None, None))  # fmt: skip
            continue
        if run.returncode is None or (case is None and not measured):
            why = run.problem or _tail(run.output)
            rows.append(OpRow(library, name, gate, "timeout" if run.returncode is None
                              else "fail", why, run.wall_s, None))  # fmt: skip
            continue
        said, detail = outcome(gate, case, measured)
        lock_s = sum(
            (r.measurement.ended_s or 0.0) - (r.measurement.started_s or 0.0) for r in measured
        )
        wall_s = case.time_s if case else sum(r.measurement.wall_s for r in measured)
        rows.append(OpRow(library, name, gate, said, detail, wall_s, lock_s if measured else None))
    return rows


def _tail(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else "no output"


def run_library(
    library: str, releases: tuple[Path, Path] | None, args: argparse.Namespace, work: Path
) -> tuple[list[OpRow], list[Run]]:
    root = work / library
    build_repository(root, library, releases, args.budget)
    test_name = LIBRARIES[library][1]
    selected = ("-k", args.k) if args.k else ()
    rows: list[OpRow] = []
    runs: list[Run] = []
    ops: list[str] = []
    for label, options, gates in PROCESSES:
        wanted = [gate for gate in gates if gate in args.gates]
        if not wanted:
            continue
        chosen = ("-k", args.explain_k) if label == "explain" and args.explain_k else selected
        timeout_s = time_left(args)
        if timeout_s is None:
            gate_rows = [
                OpRow(library, name, label if gate == "save" else gate, "not run",
                      "the run's --deadline came first", None, None)
                for gate in wanted for name in ops or ["(all)"]
            ]  # fmt: skip
        else:
            run = run_test_file(
                root, test_name, (*options, *chosen), args.out / library, label, timeout_s
            )
            runs.append(run)
            ops = ops or [name for name in run.cases if name.startswith("test_")]
            gate_rows = [
                row
                for gate in wanted
                for row in op_rows(library, label if gate == "save" else gate, run, ops)
            ]
        rows += gate_rows
        for row in gate_rows:
            print(render([row], header=False), flush=True)
        write_json(str(args.out / library / "rows.json"), [asdict(row) for row in rows])
    return rows, runs


def render(rows: list[OpRow], header: bool = True) -> str:
    """The table: one line per op and gate."""
    cells = [
        (r.library, r.op.removeprefix("test_"), r.gate, r.outcome, _seconds(r.wall_s),
         _seconds(r.lock_s), r.detail)
        for r in rows
    ]  # fmt: skip
    if not header:
        return "  ".join(str(c) for c in cells[0])
    return text_table(("library", "op", "gate", "outcome", "wall s", "GPU lock s", "why"), cells)


def pivot(rows: list[OpRow]) -> str:
    """One line per op, a column per gate (its outcome), then the longest wall and GPU lock
    over its gates: the table docs/benchmarks.md keeps; each row's reason is in the long
    table (table.txt) and rows.json."""
    gates = [g for g in ("smoke", "measure", "save1", "save2", "save3", "judge", "explain", "ab")
             if any(r.gate == g for r in rows)]  # fmt: skip
    ops: dict[tuple[str, str], dict[str, OpRow]] = {}
    for row in rows:
        ops.setdefault((row.library, row.op), {})[row.gate] = row
    cells = []
    for (library, op), by_gate in ops.items():
        walls = [r.wall_s for r in by_gate.values() if r.wall_s is not None]
        locks = [r.lock_s for r in by_gate.values() if r.lock_s is not None]
        cells.append((
            library, op.removeprefix("test_"),
            *(by_gate[g].outcome if g in by_gate else "-" for g in gates),
            _seconds(max(walls, default=None)), _seconds(max(locks, default=None)),
        ))  # fmt: skip
    return text_table(("library", "op", *gates, "wall s (max)", "GPU lock s (max)"), cells)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def summary(rows: list[OpRow], runs: list[Run]) -> str:
    """The last line: ops measured, outcomes counted, the bounds kept, wall and GPU lock."""
    ops = {(r.library, r.op) for r in rows}
    counts = Counter(r.outcome for r in rows)
    said = ", ".join(f"{n} {word}" for word, n in counts.most_common())
    killed = sum(run.returncode is None for run in runs)
    wall_s = sum(run.wall_s for run in runs)
    lock_s = sum(run.lock_s or 0.0 for run in runs)
    return (
        f"{len(ops)} ops x {len({r.gate for r in rows})} gates, {len(runs)} processes: {said}; "
        f"{killed} killed at their bound; wall {wall_s:.0f} s, GPU lock {lock_s:.1f} s"
    )


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--liger", nargs=2, type=Path, metavar=("OLD", "NEW"))
    parser.add_argument("--flaggems", nargs=2, type=Path, metavar=("OLD", "NEW"))
    parser.add_argument("--torch", action="store_true", help="torch's own ops, A/B of an edit")
    bounded_processes(parser, budget=0.25)
    parser.add_argument(
        "--gates", default=",".join(GATE_NAMES), help=f"a subset of {','.join(GATE_NAMES)}"
    )
    parser.add_argument("-k", default="", help="pytest -k expression (a subset of the ops)")
    parser.add_argument("--explain-k", default="", help="-k of the explain gate (default: -k)")
    args = parser.parse_args(argv)
    args.gates = set(args.gates.split(","))
    unknown = args.gates - set(GATE_NAMES)
    if unknown:
        parser.error(f"--gates: unknown {', '.join(sorted(unknown))}")
    if not (args.liger or args.flaggems or args.torch):
        parser.error("name at least one of --liger OLD NEW, --flaggems OLD NEW, --torch")
    for pair in (args.liger, args.flaggems):
        for path in pair or ():
            if not path.exists():
                parser.error(f"{path}: no such wheel or folder")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    work = scratch_out(args, "real-ops")
    plan = [("liger", args.liger), ("flaggems", args.flaggems), ("torch", None)]
    rows: list[OpRow] = []
    runs: list[Run] = []
    for library, releases in plan:
        if not (args.torch if library == "torch" else releases):
            continue
        pair = (releases[0], releases[1]) if releases else None
        more_rows, more_runs = run_library(library, pair, args, work)
        rows += more_rows
        runs += more_runs
    write_json(str(args.out / "rows.json"), [asdict(row) for row in rows])
    (args.out / "table.txt").write_text(render(rows) + "\n")
    print(f"\none row per op and gate, with the reasons: {args.out / 'table.txt'}\n")
    print(pivot(rows))
    print(summary(rows, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
