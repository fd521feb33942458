"""What each test runs, recorded for a callable's A/B under --gpuperf-compare: the recorder
(session/executed.py) starts before the test's first fixture is set up and stops when its
body returns; the fixtures the test uses are described for session/base_fixtures.py. Only
for tests that use `gpu_bench` in a run that compares: nothing else pays for it.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf.plugin.state import FIXTURE, RECORDER, state_of

if TYPE_CHECKING:
    from pytest_gpuperf.session.base_fixtures import FixtureSpec


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """Start recording before pytest sets up the test's fixtures (the outermost wrapper)."""
    if state_of(item.config).settings.compare_ref and FIXTURE in getattr(item, "fixturenames", ()):
        from pytest_gpuperf.session.executed import Recorder

        recorder = item.stash[RECORDER] = Recorder()
        recorder.start()
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Stop recording as the body returns (the innermost wrapper: before the verdict's
    wrapper judges, confirms and explains, which the record no longer needs)."""
    try:
        return (yield)
    finally:
        _stop(item)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    """A test whose setup failed never reached its body: its recording ends here."""
    _stop(item)
    return (yield)


def _stop(item: pytest.Item) -> None:
    recorder = item.stash.get(RECORDER, None)
    if recorder is not None:
        recorder.stop()


def fixture_specs(item: pytest.Item) -> tuple[FixtureSpec, ...] | None:
    """Each fixture the test uses, as its closest definition says (pytest's own record of the
    closure, the same from 8.0 to 9.x); None when this pytest keeps it elsewhere."""
    from pytest_gpuperf.session.base_fixtures import FixtureSpec

    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", None)
    if not isinstance(definitions, Mapping):
        return None
    params: Mapping[str, Any] = getattr(getattr(item, "callspec", None), "params", None) or {}
    specs = []
    for name in getattr(item, "fixturenames", ()):
        chain = definitions.get(name)
        if not chain:
            continue  # "request": not a fixture of its own
        definition = chain[-1]
        function = getattr(definition, "func", None)
        if not callable(function):
            return None
        argnames = tuple(getattr(definition, "argnames", ()))
        specs.append(
            FixtureSpec(
                name,
                function,
                argnames,
                scope=str(getattr(definition, "scope", "function")),
                parametrized=name in params or getattr(definition, "params", None) is not None,
                extends=name in argnames,
            )
        )
    return tuple(specs)
