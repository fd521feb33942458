"""The session's modules read each other through public names only: kernel_pairs.py and
callable_pairs.py take what they need of `gpu_bench` from its properties, `base_of` and the
`PairInputs` it hands over (session/fixture.py), never from its private fields, so GpuBench
can change its insides without breaking the A/B code that reads it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_gpuperf

SESSION = Path(pytest_gpuperf.__file__).parent / "session"


def private_reads(source: str) -> list[str]:
    """Every `x._name` in `source` where x is not `self` or `cls` (dunders are public)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") or (
            isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        ):
            continue
        found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_of_the_session_reads_another_objects_private_fields():
    found = {
        path.name: reads
        for path in sorted(SESSION.glob("*.py"))
        if (reads := private_reads(path.read_text(encoding="utf-8")))
    }
    assert not found, f"private fields read from outside their class: {found}"


def test_the_check_sees_a_private_read():
    source = "def f(bench):\n    return bench._body, self._own, bench.__class__, bench.body\n"
    assert private_reads(source) == ["2: bench._body"]
