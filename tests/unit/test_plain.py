"""One serialisation: every field of a row survives plain data (xdist, JSON) and comes back."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace

import numpy as np

from pytest_gpuperf.baseline.ref import BaselineRef, TrailPoint
from pytest_gpuperf.engine.plain import from_plain, to_plain
from pytest_gpuperf.engine.results import ClockReport, GpuIdentity, Measurement
from pytest_gpuperf.engine.roofline import Work
from pytest_gpuperf.record.checks import (
    BaselineCheck,
    ComparedFile,
    ComparisonCheck,
    Drift,
    FloorCheck,
    NoiseBand,
)
from pytest_gpuperf.record.verdict import Acceptance, BeyondPeak, Note, Row, SaveAction, Verdict
from pytest_gpuperf.runtime.info import DeviceInfo, KernelResources


def filled(cls, **overrides):
    """An instance of `cls` with no field left at its default (so a lost field shows)."""
    values = {}
    hints = __import__("typing").get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name in overrides:
            values[field.name] = overrides[field.name]
            continue
        kind = hints[field.name]
        values[field.name] = _sample(kind, field.name)
    return cls(**values)


def _sample(kind, name):
    text = str(kind)
    if "tuple[float, float]" in text:
        return (0.25, 0.75)
    if "tuple[int, int, int]" in text:
        return (4, 2, 1)
    if "tuple[float, ...]" in text:
        return (1.5e-6, 1.75e-6)
    if "tuple[int, ...]" in text:
        return (0, 1, 0)
    if "tuple[str, ...]" in text:
        return ("a", "b")
    if kind is bool or text == "bool":
        return True
    if "float" in text:
        return 0.125
    if "int" in text:
        return 7
    if "dict" in text:
        return {"k": [1, 2], "n": 3.5}
    return f"<{name}>"


def test_every_field_of_a_row_round_trips_through_json():
    measurement = filled(
        Measurement,
        clocks=filled(ClockReport),
        resources=filled(KernelResources),
        gpu=filled(GpuIdentity),
        work=filled(Work),
    )
    point = filled(TrailPoint)
    ref = filled(BaselineRef, trail=(point, point))
    drift = filled(Drift, steps=(point,))
    verdict = filled(
        Verdict,
        baseline=filled(
            BaselineCheck,
            baseline=ref,
            info=filled(BaselineRef, path="other", trail=()),
            confirmation=filled(
                BaselineCheck,
                baseline=ref,
                info=None,
                confirmation=None,
                band=filled(NoiseBand),
                drift=None,
            ),
            band=filled(NoiseBand),
            drift=drift,
        ),
        floor=filled(FloorCheck),
        comparison=filled(
            ComparisonCheck,
            confirmation=filled(ComparisonCheck, confirmation=None, compared_files=()),
            compared_files=(filled(ComparedFile), filled(ComparedFile, path="conftest.py")),
        ),
        save=filled(SaveAction),
        notes=(Note("kind", ("x", "y")),),
        acceptance=filled(Acceptance),
        beyond_peak=filled(BeyondPeak),
        flops_floor=filled(FloorCheck, origin="min_flops"),
        roofline_floor=filled(FloorCheck, origin="min_roofline"),
    )
    traffic = {"lines": ["head moved +1.2% DRAM bytes"], "head": {"kernel": "k"}}
    explain = {"code": None, "traffic": traffic, "bytes_check": None}
    verdict = replace(verdict, explain=explain)
    row = Row("tests/x.py::test_y[a|b]", measurement, verdict, "passed")
    wire = json.loads(json.dumps(to_plain(row)))  # what xdist and the JSON report carry
    assert from_plain(Row, wire) == row


def test_numpy_numbers_and_non_finite_floats_become_plain():
    data = to_plain({"a": np.float32(1.5), "b": float("nan"), "c": np.int64(3), "d": (1, 2)})
    assert data == {"a": 1.5, "b": None, "c": 3, "d": [1, 2]}
    assert type(data["c"]) is int


def test_device_info_round_trips():
    info = filled(DeviceInfo, pci_bus_id="0000:c1:00.0")
    assert from_plain(DeviceInfo, to_plain(info)) == info


def test_missing_fields_take_their_defaults():
    """A report written before a field existed still reads back."""
    data = to_plain(filled(ClockReport))
    del data["power_w"]
    assert from_plain(ClockReport, data).power_w is None
