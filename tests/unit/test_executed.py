"""session/executed.py: what a test ran and opened, recorded with the interpreter's own hooks
(sys.monitoring on 3.12+, sys.setprofile before), given back afterwards, and said to be
incomplete where another tool holds the hook."""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_gpuperf.record.json_text import read_json_file
from pytest_gpuperf.session import executed
from pytest_gpuperf.session.executed import Recorder, source_of, watching_opens

MONITORING = sys.version_info >= (3, 12)


def helper_here() -> int:
    return 1


def test_a_recording_sees_the_functions_that_ran_and_the_files_read(tmp_path):
    data = tmp_path / "config.json"
    data.write_text("{}")
    recorder = Recorder()
    recorder.start()
    try:
        helper_here()
        data.read_text()
        (tmp_path / "out.txt").write_text("written, not read")
    finally:
        record = recorder.stop()
    assert __file__ in record.executed
    assert str(data) in record.opened
    assert str(tmp_path / "out.txt") not in record.opened
    assert record.incomplete == ""


def test_nothing_is_recorded_while_paused_nor_after_the_stop(tmp_path):
    data = tmp_path / "read.txt"
    data.write_text("x")
    recorder = Recorder()
    recorder.start()
    with executed.paused():
        data.read_text()
    record = recorder.stop()
    data.read_text()
    assert str(data) not in record.opened and str(data) not in recorder.snapshot().opened


def test_the_hooks_are_given_back():
    recorder = Recorder()
    before = sys.getprofile()
    recorder.start()
    recorder.stop()
    assert sys.getprofile() is before
    if MONITORING:
        assert sys.monitoring.get_tool(4) is None and sys.monitoring.get_tool(3) is None


def test_a_python_profile_function_is_chained_and_a_held_hook_makes_it_incomplete():
    """3.10/3.11: a Python profile function keeps being called and is set again; a C
    profiler's (cProfile) is left alone and the recording is incomplete. 3.12+: the tool ids
    another tool holds make it incomplete."""
    if MONITORING:
        sys.monitoring.use_tool_id(3, "another")
        sys.monitoring.use_tool_id(4, "another too")
        try:
            recorder = Recorder()
            recorder.start()
            record = recorder.stop()
        finally:
            sys.monitoring.free_tool_id(3)
            sys.monitoring.free_tool_id(4)
        assert record.incomplete == "sys.monitoring's tool ids 4 and 3 are taken by other tools"
        return
    import cProfile

    events: list[str] = []

    def theirs(frame, event, arg):
        events.append(event)

    sys.setprofile(theirs)
    try:
        recorder = Recorder()
        recorder.start()
        helper_here()
        record = recorder.stop()
        assert sys.getprofile() is theirs and "call" in events
        assert __file__ in record.executed and record.incomplete == ""
    finally:
        sys.setprofile(None)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        held = sys.getprofile()
        recorder = Recorder()
        recorder.start()
        record = recorder.stop()
        assert sys.getprofile() is held
    finally:
        profiler.disable()
    assert record.incomplete == "sys.setprofile is held by another profiler (Profile)"


def test_a_watch_sees_what_the_users_code_opens_not_the_plugins(tmp_path):
    mine, plugins = tmp_path / "mine.txt", tmp_path / "plugins.json"
    mine.write_text("x")
    plugins.write_text("{}")
    with watching_opens() as seen:
        mine.read_text()
        read_json_file(plugins, "a test file")
    assert str(mine) in seen and str(plugins) not in seen


def test_a_cached_bytecode_file_stands_for_its_source():
    pyc = Path("/repo/pkg/__pycache__/mod.cpython-311.pyc")
    assert source_of(str(pyc)) == Path("/repo/pkg/mod.py")
    assert source_of("/repo/data.bin") == Path("/repo/data.bin")


def test_a_hook_taken_from_the_recording_is_left_to_its_taker():
    """The test frees the recording's sys.monitoring tool id (3.12+) or sets its own profile
    function (3.10/3.11): the recording ends incomplete and leaves the hook as it found it."""
    recorder = Recorder()
    recorder.start()
    if MONITORING:
        sys.monitoring.free_tool_id(4)
        sys.monitoring.use_tool_id(4, "the test's own")
        try:
            record = recorder.stop()
            assert sys.monitoring.get_tool(4) == "the test's own"
        finally:
            sys.monitoring.free_tool_id(4)
        assert record.incomplete == "the test freed the sys.monitoring tool id of the recording"
        return

    def other(frame, event, arg):
        pass

    sys.setprofile(other)
    try:
        record = recorder.stop()
        assert sys.getprofile() is other
    finally:
        sys.setprofile(None)
    assert record.incomplete == "the test replaced the profile function while it was recorded"
