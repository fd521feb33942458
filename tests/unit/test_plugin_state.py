"""The run's state hands out its session through two typed accessors: `session` opens it,
`opened_session` only tells whether something did, so the end of the run never opens a device
to close it. No module but plugin/state.py reads the private field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest_gpuperf
from pytest_gpuperf.config.settings import Settings
from pytest_gpuperf.plugin.state import PluginState


def test_opened_session_is_none_until_something_opens_it(tmp_path):
    state = PluginState(Settings(backends=("sim",)), tmp_path, None)
    assert state.opened_session is None
    assert state.opened_session is None  # asking opened nothing
    session = state.session
    assert state.opened_session is session and state.session is session
    session.close()


def test_only_the_state_module_reads_the_private_session():
    package = Path(pytest_gpuperf.__file__).parent
    private = re.compile(r"\b(?!self\b)\w+\._session\b")
    readers = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "state.py" or path.parent.name != "plugin"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert readers == []
