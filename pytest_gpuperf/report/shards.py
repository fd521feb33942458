"""The shards' JSON reports (`--gpuperf-shard=K/N`) made into one report with one verdict.

A suite split over N CI runners is one run: one commit, one device model, one suite of
measuring tests sharing one false-alarm budget (gate/suite.py). The merge checks that the
reports say so before it trusts them: every shard 1..N present once, the same commit, device
key, suite size, false-alarm target, base commit and shard plan (a runner that planned
another partition may have run a test twice or never), and no test reported by two shards.
The merged rows go through the same renderers as one pytest run's (json_report.py,
markdown_summary.py, junit.py, terminal.py); the verdict fails when any of those checks does
or any shard failed (a failed measurement or test, a problem, Ctrl-C).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.engine.results import FAIL, Row
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.suite import SuiteBudget
from pytest_gpuperf.report.reading import read_report
from pytest_gpuperf.report.suite import suite_lines
from pytest_gpuperf.report.text import ReportMeta

PASSED, FAILED = "passed", "failed"
# pytest's exit statuses a shard may end with and still have passed: all passed, and no tests
# (a shard of a suite smaller than N)
_CLEAN_EXITS = (0, 5)


@dataclass(frozen=True)
class ShardReport:
    """One shard's report as read from its file."""

    path: str
    document: Mapping[str, Any]
    rows: tuple[Row, ...]

    @property
    def shard(self) -> Mapping[str, Any]:
        return self.document["shard"]

    @property
    def label(self) -> str:
        return f"{self.shard['index']}/{self.shard['count']}"

    @property
    def measured_cost_s(self) -> float:
        """Σ time_s × samples of this run's measurements: the quantity the plan balanced,
        as measured."""
        return sum(row.measurement.time_s * len(row.measurement.samples_s) for row in self.rows)

    def device_key(self) -> str | None:
        """The baseline file's key the shard measured against (`<key>-sim` when simulated)."""
        key = self.shard.get("device_key")
        if key:
            return str(key)
        keys = {
            row.measurement.device_key + ("-sim" if row.measurement.simulated else "")
            for row in self.rows
        }
        return ", ".join(sorted(keys)) or None

    def failures(self) -> list[str]:
        """Why this shard failed, one reason a line (empty: it passed)."""
        reasons = []
        failed = sorted({row.test_id for row in self.rows if row.verdict.status == FAIL})
        if failed:
            more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
            plural = "s" if len(failed) != 1 else ""
            reasons.append(
                f"{len(failed)} test{plural} failed the gate: {', '.join(failed[:5])}{more}"
            )
        others = int(self.shard.get("tests_failed", 0)) - len(failed)
        if others > 0:
            reasons.append(f"{others} other test{'s' if others != 1 else ''} failed")
        reasons += [f"problem: {problem}" for problem in self.document.get("problems", ())]
        if self.document.get("interrupted"):
            reasons.append("interrupted (Ctrl-C)")
        status = int(self.shard.get("exitstatus", 0))
        if not reasons and status not in _CLEAN_EXITS:
            reasons.append(f"pytest exited with status {status}")
        return reasons


@dataclass(frozen=True)
class MergedReport:
    """The merged rows, the report facts for the renderers, and the one verdict."""

    rows: tuple[Row, ...]
    meta: ReportMeta
    verdict: str  # PASSED or FAILED
    reasons: tuple[str, ...]  # why FAILED, one line each
    shards: tuple[ShardReport, ...]

    def markdown(self, text: str) -> str:
        """The Markdown summary of the merged rows (markdown_summary.markdown's `text`) with
        the one verdict under its title and a section on the shards at the end."""
        head, _, rest = text.partition("### pytest-gpuperf\n")
        verdict = f"**{verdict_line(self)}**\n"
        shards = "\n#### Shards\n\n" + "".join(f"- {line}\n" for line in self.lines()[:-1])
        return f"{head}### pytest-gpuperf\n\n{verdict}{rest}{shards}"

    def lines(self) -> list[str]:
        """The shard lines and the verdict, for the terminal and the Markdown summary."""
        merge, meta = self.meta.merge or {}, self.meta
        lines = []
        if self.rows and meta.suite_target > 0:
            budget = SuiteBudget(meta.suite_target, max(meta.suite_checks, 1))
            lines += suite_lines(self.rows, budget)
        lines += [shard_line(record) for record in merge.get("shards", ())]
        spread = merge.get("cost_spread")
        if spread is not None:
            lines.append(
                f"cost balance: the most expensive shard measured {spread:.1%} more than the "
                "cheapest (time × samples of its measurements)"
            )
        lines.append(verdict_line(self))
        return lines


def read_shard(path: str) -> ShardReport:
    """A shard's report; ConfigError (one line, naming the file) when it is not one."""
    read = read_report(path)
    shard = read.document.get("shard")
    if not isinstance(shard, dict) or not {"index", "count", "digest"} <= set(shard):
        raise ConfigError(
            f'{path}: the report of an unsharded run (no "shard" object); merge the reports '
            "of runs made with --gpuperf-shard=K/N"
        )
    return ShardReport(path=str(path), document=read.document, rows=read.rows)


def merge_reports(shards: Sequence[ShardReport], *, command: str = "") -> MergedReport:
    """One report of `shards` (in any order) and its verdict."""
    if not shards:
        raise ConfigError("no shard reports given")
    ordered = sorted(shards, key=lambda s: (int(s.shard["index"]), s.path))
    problems = _disagreements(ordered) + _missing(ordered) + _overlaps(ordered)
    reasons = list(problems)
    for shard in ordered:
        reasons += [f"shard {shard.label} ({shard.path}): {why}" for why in shard.failures()]
    rows = [row for shard in ordered for row in shard.rows]
    # Grouped by test file, then each shard's own (collection) order, near an unsharded run's.
    rows.sort(key=lambda row: row.test_id.split("::", 1)[0])
    first = ordered[0].document
    commit = first.get("commit") or {}
    compare = first.get("compare") or {}
    suite = first.get("suite") or {}
    records = [_shard_record(shard) for shard in ordered]
    costs = [record["measured_cost_s"] for record in records if record["measured_cost_s"] > 0]
    meta = ReportMeta(
        project=commit.get("project") or "",
        commit=commit.get("id") or "",
        commit_time=commit.get("time") or "",
        branch=commit.get("branch") or "",
        dirty=bool(commit.get("dirty")),
        command=command,
        compare_ref=compare.get("ref") or "",
        compare_commit=compare.get("commit") or "",
        device_peaks=tuple(
            (device["key"], device["peak_bps"])
            for shard in ordered
            for device in shard.document.get("devices", ())
            if "key" in device and "peak_bps" in device
        ),
        suite_target=float(suite.get("target") or 0.0),
        suite_checks=int(ordered[0].shard.get("suite_tests") or suite.get("checks") or 0),
        problems=tuple(
            problems
            + [
                f"shard {shard.label}: {problem}"
                for shard in ordered
                for problem in shard.document.get("problems", ())
            ]
        ),
        interrupted=any(shard.document.get("interrupted") for shard in ordered),
        # what `python -m pytest_gpuperf.bisect` reads: each test's kernel files, once
        tests=tuple(_tests(ordered)),
        rootdir=str(first.get("rootdir") or ""),
        wall_s=max(
            (float((s.document.get("timing") or {}).get("wall_s") or 0.0) for s in ordered),
            default=None,
        ),
        merge={
            "verdict": FAILED if reasons else PASSED,
            "reasons": reasons,
            "shards": records,
            "cost_spread": max(costs) / min(costs) - 1.0 if len(costs) > 1 else None,
        },
    )
    return MergedReport(
        rows=tuple(rows),
        meta=meta,
        verdict=FAILED if reasons else PASSED,
        reasons=tuple(reasons),
        shards=tuple(ordered),
    )


def _tests(shards: Sequence[ShardReport]) -> list[dict[str, Any]]:
    """Every shard's tests that used gpu_bench, each once, grouped by test file as the rows."""
    found: dict[str, dict[str, Any]] = {}
    for shard in shards:
        for test in shard.document.get("tests", ()):
            found.setdefault(str(test.get("test_id", "")), dict(test))
    return sorted(found.values(), key=lambda test: str(test.get("test_id", "")).split("::", 1)[0])


def _shard_record(shard: ShardReport) -> dict[str, Any]:
    """The merged report's summary of one shard (docs/json-schema.md, "merge")."""
    plan, timing = shard.shard, shard.document.get("timing") or {}
    reasons = shard.failures()
    planned = plan.get("planned_cost_s") or []
    index = int(plan["index"])
    return {
        "index": index,
        "count": int(plan["count"]),
        "path": shard.path,
        "commit": (shard.document.get("commit") or {}).get("id"),
        "device_key": shard.device_key(),
        "tests": len(plan.get("tests", ())),
        "measuring": len(plan.get("measuring", ())),
        "measurements": len(shard.rows),
        "planned_cost_s": planned[index - 1] if len(planned) >= index else None,
        "measured_cost_s": shard.measured_cost_s,
        "wall_s": timing.get("wall_s"),
        "gpu_lock_held_s": timing.get("gpu_lock_held_s"),
        "status": FAILED if reasons else PASSED,
        "reasons": reasons,
    }


def _disagreements(shards: Sequence[ShardReport]) -> list[str]:
    """One line per fact on which the shards disagree (the run is then not one run)."""
    facts = {
        "the number of shards": lambda s: s.shard.get("count"),
        "the commit": lambda s: _commit(s.document),
        "the device key": lambda s: s.device_key(),
        "the suite size (measuring tests)": lambda s: s.shard.get("suite_tests"),
        "the suite false-alarm target": lambda s: (s.document.get("suite") or {}).get("target"),
        "the base commit of --gpuperf-compare": lambda s: (s.document.get("compare") or {}).get(
            "commit"
        ),
        "the shard plan (baselines, test selection or plugin version differ)": lambda s: (
            s.shard.get("digest")
        ),
    }
    lines = []
    for what, fact in facts.items():
        values: dict[Any, list[str]] = {}
        for shard in shards:
            value = fact(shard)
            if value is None and what == "the device key":
                continue  # a shard that measured nothing opened no device
            values.setdefault(value, []).append(shard.label)
        if len(values) > 1:
            said = "; ".join(
                f"{', '.join(labels)}: {value if value is not None else 'none'}"
                for value, labels in values.items()
            )
            lines.append(f"shards disagree on {what}: {said}")
    return lines


def _commit(document: Mapping[str, Any]) -> str:
    commit = document.get("commit") or {}
    return str(commit.get("id") or "") + ("-dirty" if commit.get("dirty") else "")


def _missing(shards: Sequence[ShardReport]) -> list[str]:
    """Shards given twice, and shards of 1..N with no report."""
    lines = []
    count = max(int(shard.shard["count"]) for shard in shards)
    given: dict[int, list[str]] = {}
    for shard in shards:
        given.setdefault(int(shard.shard["index"]), []).append(shard.path)
    for index, paths in sorted(given.items()):
        if len(paths) > 1:
            lines.append(f"shard {index}/{count} given {len(paths)} times: {', '.join(paths)}")
    absent = [index for index in range(1, count + 1) if index not in given]
    for index in absent:
        lines.append(
            f"shard {index}/{count} is missing: no report for it (did its job end before "
            "writing --gpuperf-json?); its tests were not measured"
        )
    return lines


def _overlaps(shards: Sequence[ShardReport]) -> list[str]:
    """Tests that two shards ran: the plan gives each test to one shard."""
    owners: dict[str, list[str]] = {}
    for shard in shards:
        for test in dict.fromkeys(shard.shard.get("tests", ())):
            owners.setdefault(test, []).append(shard.label)
    twice = {test: labels for test, labels in owners.items() if len(labels) > 1}
    if not twice:
        return []
    shown = "; ".join(f"{test} ({', '.join(labels)})" for test, labels in list(twice.items())[:5])
    more = f" and {len(twice) - 5} more" if len(twice) > 5 else ""
    return [f"{len(twice)} test(s) ran in more than one shard: {shown}{more}"]


def shard_line(record: Mapping[str, Any]) -> str:
    """'shard 2/3: 6 measuring tests, 6 measurements, cost 2.93 ms planned / 2.95 ms
    measured, 7.8 s wall: passed'."""
    planned = record.get("planned_cost_s")
    cost = f"cost {record['measured_cost_s'] * 1e3:.3g} ms measured"
    if planned:
        cost += f" ({planned * 1e3:.3g} ms planned)"
    wall = record.get("wall_s")
    wall_text = f", {wall:.1f} s wall" if wall is not None else ""
    status = record["status"]
    if record["reasons"]:
        status += ": " + "; ".join(record["reasons"])
    return (
        f"shard {record['index']}/{record['count']}: {record['measuring']} measuring tests, "
        f"{record['measurements']} measurements, {cost}{wall_text}: {status}"
    )


def verdict_line(merged: MergedReport) -> str:
    """'merged 3 shards: 17 measuring tests, 19 measurements: passed' (or failed, and why)."""
    tests = len({row.test_id for row in merged.rows})
    text = (
        f"merged {len(merged.shards)} shard{'s' if len(merged.shards) != 1 else ''} "
        f"({merged.meta.suite_checks} measuring tests in the suite; {tests} measured, "
        f"{len(merged.rows)} measurements): {merged.verdict.upper()}"
    )
    if merged.verdict == FAILED:
        text += f" ({len(merged.reasons)} reason{'s' if len(merged.reasons) != 1 else ''})"
    return text
