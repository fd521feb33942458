"""session/base_fixtures.py's pure parts: which fixtures a callable's base makes again at
the base revision, and how pytest's decorator is unwrapped to the function it calls."""

from __future__ import annotations

import pytest

from pytest_gpuperf.session.base_fixtures import FixtureSpec, _unwrap_steps, to_remake


def test_pytests_fixture_decorator_is_unwrapped_one_step():
    """pytest 8.0-8.3 wraps a fixture in a function, 8.4-9.x in a FixtureFunctionDefinition;
    both set `__wrapped__` to the user's function, which pytest calls."""

    def launches():
        return 1

    held = pytest.fixture(launches)
    assert _unwrap_steps(held, launches) == 1
    assert _unwrap_steps(launches, launches) == 0
    assert _unwrap_steps(object(), launches) is None


def test_a_fixture_is_made_again_when_its_file_or_one_it_asks_for_changed(tmp_path):
    conftest = tmp_path / "conftest.py"
    source = "def size():\n    return 1\n\ndef buffers(size):\n    return size\n\n"
    source += "def other():\n    return 0\n"
    conftest.write_text(source)
    names: dict = {"__file__": str(conftest), "__name__": "conftest"}
    exec(compile(source, str(conftest), "exec"), names)
    specs = [
        FixtureSpec("size", names["size"]),
        FixtureSpec("buffers", names["buffers"], ("size",)),
        FixtureSpec("other", names["other"]),
        FixtureSpec("tmp_path", pytest.fixture, ("tmp_path_factory",)),  # not the user's
    ]
    toplevel = tmp_path.resolve()
    assert to_remake(specs, frozenset(), toplevel) == {}
    remade = to_remake(specs, frozenset({conftest.resolve()}), toplevel)
    assert remade == {"size": True, "buffers": True, "other": True}
    unchanged_asker = [FixtureSpec("size", names["size"]), FixtureSpec("late", len, ("size",))]
    assert to_remake(unchanged_asker, frozenset({conftest.resolve()}), toplevel) == {
        "size": True,
        "late": False,
    }
