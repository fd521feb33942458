"""SIGTERM and SIGINT at random points of `pytest --gpuperf-save`: is an entry ever torn or
lost? (issue 55 item 11; not a test: it runs N separate pytest processes on the simulated
device and prints a table of what it found.)

Each run starts from one baseline file holding an entry of a test this suite does not have
(it must survive every save) and the suite's own entries from an earlier save; the suite's
tests then measure again and save. A signal, SIGTERM or SIGINT at random, is sent at a random
moment: half the runs anywhere in the run's life (startup, collection, the tests, the save,
the reports), half within 0.4 s after the run's end began (the save and the reports), a
moment the inner conftest says by touching a file when `pytest_sessionfinish` starts. After
each run:

- the baseline file loads (a torn file does not: the store validates it whole);
- no entry is lost: the kept entry, and every entry of the suite, is in it;
- each entry of the suite is either as it was or as this run saved it, and this run's JSON
  report (when written) says "saved" exactly for the entries whose save is in the file;
- no temporary lies beside it, and the output holds no traceback.

    python3 bench/save_signals.py --runs 100 [--seed 1] [--json out.json]

Exit 1 when any run broke one of these. No GPU is needed (the simulated device).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # lab, run from anywhere

from lab.children import run
from lab.pytest_runs import plugin_env, pytest_command
from lab.runs import scratch

from pytest_gpuperf.baseline.store import BaselineStore
from tests.plugin.conftest import INNER_CONFTEST, INNER_HELPERS, VADD, baseline_toml

DEVICE = "mi300x-sim"
TESTS = 8  # measuring tests: a save of 8 entries into a file of 9
KEPT = "tests/perf/test_gone.py::test_kept"  # an entry no test of the run makes
ENDING = "ending"  # the marker file: the session's end (the save) began
GUARD_S = 300.0

SUITE = "import numpy as np\nfrom gpuperf_helpers import add\n\n" + "".join(
    f"\ndef test_{n}(gpu_bench):\n    add(gpu_bench)\n" for n in range(TESTS)
)

MARK_THE_END = """

import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    marker = os.environ.get("SAVE_SIGNALS_MARKER")
    if marker:
        open(marker, "w").close()
"""


def make_project(folder: Path) -> None:
    (folder / "vadd.hip").write_text(VADD.format(directive=""))
    (folder / "gpuperf_helpers.py").write_text(INNER_HELPERS)
    (folder / "conftest.py").write_text(INNER_CONFTEST + MARK_THE_END)
    (folder / "test_perf.py").write_text(SUITE)
    (folder / "baselines").mkdir()


def save_command(*extra: str) -> list[str]:
    return pytest_command(
        "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--gpuperf-backend=sim",
        "-o", "gpuperf_budget=0.02", "--gpuperf-save", *extra,
    )  # fmt: skip


def environment(folder: Path, marker: Path | None) -> dict[str, str]:
    """The plugin of this checkout, loaded as an installed one is (the command names none),
    a lock folder and kernel cache of the run's own; no PYTEST_ADDOPTS of the caller's."""
    return plugin_env(
        autoload=True, PYTEST_ADDOPTS=None, SAVE_SIGNALS_MARKER=str(marker or ""),
        GPUPERF_LOCK_DIR=str(folder / ".locks"), GPUPERF_CACHE_DIR=str(folder.parent / "cache"),
    )  # fmt: skip


def entries(path: Path) -> dict[str, tuple[str, ...]]:
    """Each entry's test id and the `when` of its saves (raises on a torn file)."""
    store = BaselineStore(path.parent)
    loaded = store.load(DEVICE)
    return {
        entry.test_id: tuple(save.when for save in entry.saves) for entry in loaded.entries.values()
    }


def one_run(work: Path, seed_file: Path, rng: random.Random, early: bool) -> dict:
    folder = work / "project"
    baseline = folder / "baselines" / f"{DEVICE}.toml"
    shutil.copyfile(seed_file, baseline)
    before = entries(baseline)
    marker = folder / ENDING
    marker.unlink(missing_ok=True)
    report = folder / "report.json"
    report.unlink(missing_ok=True)
    which = rng.choice([signal.SIGTERM, signal.SIGINT])
    began = time.monotonic()
    process = subprocess.Popen(
        save_command(f"--gpuperf-json={report}"),
        cwd=folder,
        env=environment(folder, marker),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    if early:
        delay = rng.uniform(0.0, 4.0)
        while process.poll() is None and time.monotonic() - began < delay:
            time.sleep(0.005)
        phase = "ending" if marker.exists() else "before the end"
    else:
        while process.poll() is None and not marker.exists():
            if time.monotonic() - began > GUARD_S:
                break
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.4))
        phase = "ending"
    sent = process.poll() is None
    if sent:
        process.send_signal(which)
    else:
        phase = "after the end"
    output, _ = process.communicate(timeout=GUARD_S)
    return check(baseline, before, report, output) | {
        "signal": which.name if sent else "none (ended first)",
        "phase": phase,
        "exit": process.returncode,
    }


def check(baseline: Path, before: dict[str, tuple[str, ...]], report: Path, output: str) -> dict:
    """What this run left: torn, lost, wrong claims, temporaries, tracebacks."""
    problems = []
    try:
        after = entries(baseline)
    except Exception as torn:  # the store refuses a torn file: that is the finding
        return {"problems": [f"torn: {type(torn).__name__}: {torn}"], "saved": 0}
    lost = sorted(set(before) - set(after))
    if lost:
        problems.append(f"lost: {', '.join(lost)}")
    changed = {test for test in after if after[test] != before.get(test)}
    for test in sorted(changed):  # as it was, or as this run saved it: one save more (the
        old = before.get(test, ())  # oldest dropped once the history is full)
        kept = after[test][:-1]
        if kept != old[len(old) - len(kept) :]:
            problems.append(f"{test}: its saves are neither the old ones nor the old plus one")
    if report.exists():
        document = json.loads(report.read_text())
        for row in document["results"]:
            saved = bool((row["verdict"].get("save") or {}).get("saved"))
            if saved != (row["test_id"] in changed):
                problems.append(
                    f"{row['test_id']}: the report says saved={saved}, the file says "
                    f"{'saved' if row['test_id'] in changed else 'not saved'}"
                )
    strays = sorted(p.name for p in baseline.parent.iterdir() if p != baseline)
    if strays:
        problems.append(f"left beside the file: {', '.join(strays)}")
    outside = ""
    if "Traceback" in output or "INTERNALERROR" in output:
        start = output.find("Traceback") if "Traceback" in output else output.find("INTERNALERROR")
        text = output[start:]
        frames = [line for line in text.splitlines() if line.strip().startswith('File "')]
        # a frame of the plugin's code; one "in <module>" is Python importing it while pytest
        # loads its plugins, before any hook of ours runs (nothing of ours can catch that)
        ours = any("pytest_gpuperf" in f and not f.endswith("in <module>") for f in frames)
        if ours or "INTERNALERROR" in text:
            problems.append(f"a traceback through the plugin, or pytest's: {text[-1500:]!r}")
        else:  # pytest's own code: loading its plugins, or its last cleanup after our end
            outside = text.strip().splitlines()[-1][:120]
    return {"problems": problems, "saved": len(changed), "outside": outside}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write every run's findings here")
    options = parser.parse_args(argv)
    rng = random.Random(options.seed)
    with scratch("save-signals") as work:
        folder = work / "project"
        folder.mkdir()
        make_project(folder)
        # the suite's entries from an earlier save, and one entry no test of the run makes
        first = run(save_command(), cwd=folder, env=environment(folder, None), timeout_s=GUARD_S)
        baseline = folder / "baselines" / f"{DEVICE}.toml"
        if first.returncode != 0 or not baseline.exists():
            print(f"the first save failed:\n{first.stdout}{first.stderr}", file=sys.stderr)
            return 2
        kept = baseline_toml(DEVICE, [{"id": KEPT, "efficiency": 0.5}]).split("\n", 2)[2]
        baseline.write_text(baseline.read_text() + "\n" + kept)
        seed_file = work / "seed.toml"
        shutil.copyfile(baseline, seed_file)
        assert KEPT in entries(baseline) and len(entries(baseline)) == TESTS + 1
        findings = []
        for n in range(options.runs):
            found = one_run(work, seed_file, rng, early=n % 2 == 0)
            findings.append(found)
            mark = "ok" if not found["problems"] else "; ".join(found["problems"])
            print(
                f"run {n + 1:3d}: {found['signal']:<18} {found['phase']:<15} exit "
                f"{found['exit']:3d}, {found['saved']} saved: {mark}",
                flush=True,
            )
    summary(findings)
    if options.json:
        options.json.write_text(json.dumps(findings, indent=1))
    return 1 if any(found["problems"] for found in findings) else 0


def summary(findings: list[dict]) -> None:
    print()
    print("| signal | when | runs | all saved | none saved | some saved | broken |")
    print("|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, str], list[dict]] = {}
    for found in findings:
        groups.setdefault((found["signal"], found["phase"]), []).append(found)
    for (which, phase), runs in sorted(groups.items()):
        every = sum(1 for r in runs if r["saved"] == TESTS)
        none = sum(1 for r in runs if r["saved"] == 0)
        broken = sum(1 for r in runs if r["problems"])
        print(
            f"| {which} | {phase} | {len(runs)} | {every} | {none} | "
            f"{len(runs) - every - none} | {broken} |"
        )
    broken = sum(1 for r in findings if r["problems"])
    outside = sum(1 for r in findings if r["outside"])
    print(
        f"\n{len(findings)} runs: {broken} with a torn or lost entry, a wrong claim, a stray "
        f"file or a traceback through the plugin; {outside} with a Ctrl-C traceback through "
        "pytest's code alone (while it loads its plugins, or in its last cleanup after the "
        "plugin's end: nothing of the plugin's is running then)"
    )


if __name__ == "__main__":
    sys.exit(main())
