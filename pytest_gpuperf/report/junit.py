"""JUnit XML: properties (pytest's `record_property`) for each measurement, and a whole
document for reports made outside pytest (the shards' merge)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from xml.etree import ElementTree

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.record.verdict import FAIL, Row, Verdict
from pytest_gpuperf.report.roofline_words import roofline_extra
from pytest_gpuperf.report.visible import visible


def junit_properties(
    measurement: Measurement, verdict: Verdict, *, prefix: str = "gpuperf"
) -> list[tuple[str, str]]:
    """Name/value pairs that land in the JUnit XML."""
    m = measurement
    low, high = m.efficiency_ci
    properties = [
        ("name", m.name),
        ("kernel", m.kernel),
        ("device", m.device_key),
        ("device_name", m.device_name),
        ("backend", m.backend),
        ("simulated", str(m.simulated).lower()),
        ("cache", m.cache),
        ("time_s", _number(m.time_s)),
        ("time_ci_s", f"{_number(m.time_ci_s[0])},{_number(m.time_ci_s[1])}"),
        ("gbps", _number(m.bandwidth_bps / 1e9)),
        ("efficiency", _number(m.efficiency)),
        ("ci", f"{_number(low)},{_number(high)}"),
        ("samples", str(len(m.samples_s))),
        ("verdict", verdict.status),
        ("baseline_status", verdict.baseline.outcome),
    ]
    if m.fingerprint:
        properties.append(("fingerprint", m.fingerprint))
    if verdict.floor is not None:
        properties.append(("floor", _number(verdict.floor.floor)))
    for key, value in roofline_extra(m).items():  # where the test declared its FLOPs
        properties.append((key, value if isinstance(value, str) else _number(value)))
    if verdict.flops_floor is not None:
        properties.append(("flops_floor", _number(verdict.flops_floor.floor)))
    if verdict.roofline_floor is not None:
        properties.append(("roofline_floor", _number(verdict.roofline_floor.floor)))
    baseline = verdict.baseline
    if baseline.baseline is not None:
        properties.append(("baseline", _number(baseline.baseline.efficiency)))
    if baseline.delta is not None:
        properties.append(("delta", _number(baseline.delta)))
    if baseline.allowance is not None:
        properties.append(("allowance", _number(baseline.allowance)))
    comparison = verdict.comparison
    if comparison is not None:
        properties += [("ab_state", comparison.state), ("ab_ref", comparison.ref)]
        if comparison.ratio is not None and comparison.ratio_ci is not None:
            properties += [
                ("ab_ratio", _number(comparison.ratio)),
                (
                    "ab_ratio_ci",
                    f"{_number(comparison.ratio_ci[0])},{_number(comparison.ratio_ci[1])}",
                ),
                ("ab_base_efficiency", _number(comparison.base_efficiency or 0.0)),
                ("ab_head_efficiency", _number(comparison.head_efficiency or 0.0)),
            ]
    rule = verdict.acceptance
    if rule is not None:
        properties += [
            ("accept_pattern", rule.pattern),
            ("accept_reason", rule.reason),
            ("accept_source", rule.origin()),
        ]
    if m.clocks is not None:
        properties.append(("throttled", str(m.clocks.throttled).lower()))
    return [(f"{prefix}_{key}", value) for key, value in properties]


def _number(value: float) -> str:
    return f"{value:.6g}"


def junit_xml(
    rows: Sequence[Row],
    *,
    suite_name: str = "pytest-gpuperf",
    failures: Sequence[str] = (),
    tests: Sequence[Mapping[str, Any]] = (),
) -> str:
    """A JUnit XML document of `rows` (the merge's, whose tests ran in several pytest
    processes): one testcase per measurement with its properties, a failing one carrying its
    failure message, and one more testcase, "run", failing with `failures` (a missing or
    disagreeing shard) when there are any, so a CI test view shows why the run is red.

    `tests` (the merge's `every_test`: test_id, outcome, message, in collection order) puts
    every test in the document once in that order: a test with measurements as its
    measurements' testcases (a test that failed beyond its gate says so on the first), a test
    without any as one testcase of its own, failed, erroring or skipped as pytest ended it."""
    suite = ElementTree.Element("testsuite", name=suite_name)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    by_test: dict[str, list[Row]] = {}
    for row in rows:
        by_test.setdefault(row.test_id, []).append(row)
    listed = {str(test["test_id"]) for test in tests}
    for test in tests:
        test_id, outcome = str(test["test_id"]), str(test.get("outcome", ""))
        message = visible(test.get("message") or "")
        measured = by_test.get(test_id, [])
        if not measured:
            _plain_case(suite, test_id, outcome, message, counts)
            continue
        for n, row in enumerate(measured):
            case = _measurement_case(suite, row, counts)
            if n == 0 and outcome in ("failed", "error") and row.verdict.status != FAIL:
                counts["failures"] += 1
                failure = ElementTree.SubElement(case, "failure", message=message or outcome)
                failure.text = f"the test {outcome} beyond its measurement: {message}"
    for row in rows:
        if row.test_id not in listed:
            _measurement_case(suite, row, counts)
    if failures:
        counts["tests"] += 1
        counts["failures"] += 1
        case = ElementTree.SubElement(suite, "testcase", classname=suite_name, name="run")
        failure = ElementTree.SubElement(case, "failure", message=visible(failures[0]))
        failure.text = "\n".join(map(visible, failures))
    for name, value in counts.items():
        suite.set(name, str(value))
    root = ElementTree.Element("testsuites")
    root.append(suite)
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _names(test_id: str) -> tuple[str, str]:
    """pytest's JUnit classname and name of a test id (read from a shard's file: control
    characters escaped, as XML 1.0 cannot hold them)."""
    test_file, _, test_name = visible(test_id).partition("::")
    return test_file.removesuffix(".py").replace("/", "."), test_name or test_file


def _measurement_case(
    suite: ElementTree.Element, row: Row, counts: dict[str, int]
) -> ElementTree.Element:
    from pytest_gpuperf.report.failure import failure_text, one_line

    classname, name = _names(row.test_id)
    counts["tests"] += 1
    case = ElementTree.SubElement(
        suite,
        "testcase",
        classname=classname,
        name=f"{name} [{visible(row.measurement.name)}, {row.measurement.cache}]",
        time=_number(row.measurement.time_s * len(row.measurement.samples_s)),
    )
    properties = ElementTree.SubElement(case, "properties")
    for key, value in junit_properties(row.measurement, row.verdict):
        ElementTree.SubElement(properties, "property", name=key, value=value)
    if row.verdict.status == FAIL:
        counts["failures"] += 1
        failure = ElementTree.SubElement(
            case, "failure", message=visible(one_line(row.measurement, row.verdict))
        )
        text = failure_text(row.measurement, row.verdict)
        failure.text = "\n".join(map(visible, text.splitlines()))
    return case


def _plain_case(
    suite: ElementTree.Element, test_id: str, outcome: str, message: str, counts: dict[str, int]
) -> None:
    """A test without a measurement, as pytest ended it."""
    classname, name = _names(test_id)
    counts["tests"] += 1
    case = ElementTree.SubElement(suite, "testcase", classname=classname, name=name)
    if outcome == "failed":
        counts["failures"] += 1
        ElementTree.SubElement(case, "failure", message=message or "failed")
    elif outcome == "error":
        counts["errors"] += 1
        ElementTree.SubElement(case, "error", message=message or "error")
    elif outcome in ("skipped", "xfailed", "not run"):
        counts["skipped"] += 1
        ElementTree.SubElement(case, "skipped", message=message or outcome)
