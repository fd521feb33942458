"""JUnit XML properties (pytest's `record_property`) for each measurement."""

from __future__ import annotations

from pytest_gpuperf.results import Measurement, Verdict


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
