"""JUnit XML: properties (pytest's `record_property`) for each measurement, and a whole
document for reports made outside pytest (the shards' merge)."""

from __future__ import annotations

from collections.abc import Sequence
from xml.etree import ElementTree

from pytest_gpuperf.engine.results import FAIL, Measurement, Row, Verdict


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
    rows: Sequence[Row], *, suite_name: str = "pytest-gpuperf", failures: Sequence[str] = ()
) -> str:
    """A JUnit XML document of `rows` (the merge's, whose tests ran in several pytest
    processes): one testcase per measurement with its properties, a failing one carrying its
    failure message, and one more testcase, "run", failing with `failures` (a missing or
    disagreeing shard) when there are any, so a CI test view shows why the run is red."""
    from pytest_gpuperf.report.failure import failure_text, one_line

    suite = ElementTree.Element("testsuite", name=suite_name)
    failed = 0
    for row in rows:
        test_file, _, test_name = row.test_id.partition("::")
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=test_file.removesuffix(".py").replace("/", "."),
            name=f"{test_name or test_file} [{row.measurement.name}, {row.measurement.cache}]",
            time=_number(row.measurement.time_s * len(row.measurement.samples_s)),
        )
        properties = ElementTree.SubElement(case, "properties")
        for name, value in junit_properties(row.measurement, row.verdict):
            ElementTree.SubElement(properties, "property", name=name, value=value)
        if row.verdict.status == FAIL:
            failed += 1
            failure = ElementTree.SubElement(
                case, "failure", message=one_line(row.measurement, row.verdict)
            )
            failure.text = failure_text(row.measurement, row.verdict)
    if failures:
        failed += 1
        case = ElementTree.SubElement(suite, "testcase", classname=suite_name, name="run")
        failure = ElementTree.SubElement(case, "failure", message=failures[0])
        failure.text = "\n".join(failures)
    suite.set("tests", str(len(rows) + bool(failures)))
    suite.set("failures", str(failed))
    suite.set("errors", "0")
    root = ElementTree.Element("testsuites")
    root.append(suite)
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
