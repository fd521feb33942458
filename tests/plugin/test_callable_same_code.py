"""A callable's "same code" is earned (issue 54): the files compared with --gpuperf-compare's
REF are every repository file the test ran (conftest.py, its fixtures, a module loaded with
importlib), read, or whose fixtures it uses, besides what it imports; a slowdown there is
timed against base's fixtures and fails. A set the run could not record in full is timed
and never switches the stored baseline off. And a base revision whose test module calls
sys.exit() has no base, in one line (issue 55). Simulated device, as test_callable_ab.py."""

from __future__ import annotations

import sys

from pytest_gpuperf.session.callable_pairs import CALLABLE_CAPTURES
from tests.git_repo import commit_all
from tests.plugin.conftest import INNER_CONFTEST, N

# The user's launcher: a callable that launches the kernel `launches` times a call.
MYKERN = """\
import numpy as np


def make(gpu_bench, kernel, n, launches):
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    da, dc = gpu_bench.to_device(a), gpu_bench.empty(n)

    def op():
        for _ in range(launches):
            gpu_bench.backend.launch(kernel, n // 256, 256, (da, da, dc, n))

    return op
"""

# a test whose launch count comes from `LAUNCHES` (the test's own code, below)
TEST = f"""\
import importlib
import importlib.util
from pathlib import Path

import mykern

N = {N}


def test_op(gpu_bench{{arguments}}):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
{{body}}    op = mykern.make(gpu_bench, kernel, N, LAUNCHES)
    gpu_bench.run(op, bytes=3 * 4 * N, name="op")
"""

FIXTURE = """

import pytest


@pytest.fixture{scope}
def launches():
    return 1
"""

# A stored baseline the callable (about 46% of peak on the simulated MI300X) misses.
STORED_90 = {"id": "test_op.py::test_op", "name": "op", "efficiency": 0.9}


def repository(gp, monkeypatch, tmp_path_factory, *, test: str, files=None, conftest=""):
    """A user's repository committed as the base: the launcher, `test` as test_op.py, more
    `files` and an addition to the conftest."""
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    (gp.path / "mykern.py").write_text(MYKERN)
    (gp.path / "test_op.py").write_text(test)
    (gp.path / "conftest.py").write_text(INNER_CONFTEST + conftest)
    for name, text in (files or {}).items():
        path = gp.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    commit_all(gp.path, "base")


def edit(gp, name: str, old: str, new: str) -> None:
    path = gp.path / name
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))


def compare(gp, *options: str):
    return gp.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json", *options)


def comparison(gp, test_id: str = "test_op.py::test_op") -> dict:
    rows = {row["test_id"]: row for row in gp.report()["results"]}
    return rows[test_id]["verdict"]["comparison"]


def ways(found: dict) -> dict[str, list[str]]:
    return {f["path"]: f["ways"] for f in found["compared_files"]}


def assert_regressed(found: dict, changed: list[str]) -> None:
    assert found["state"] == "regressed", found
    assert found["changed_files"] == changed
    assert found["loads"] == CALLABLE_CAPTURES and found["incomplete"] == ""
    assert 1.3 < found["ratio"] < 2.2  # two launches against one


def test_a_slowdown_in_a_conftest_fixture_fails_the_ab(gp, monkeypatch, tmp_path_factory):
    """The fixture that gives the launch count lives in conftest.py, which the test module
    does not import: it was "same code: not timed" and passed. conftest.py defines a fixture
    the test uses, and ran: compared, changed, and base's body gets base's fixture value."""
    test = TEST.format(arguments=", launches", body="    LAUNCHES = launches\n")
    repository(gp, monkeypatch, tmp_path_factory, test=test, conftest=FIXTURE.format(scope=""))
    edit(gp, "conftest.py", "return 1", "return 2")
    result = compare(gp, "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*A/B regressed against HEAD*", "*changed: conftest.py*"])
    found = comparison(gp)
    assert_regressed(found, ["conftest.py"])
    assert ways(found)["conftest.py"] == ["ran", "fixtures"]
    assert ways(found)["test_op.py"] == ["imported", "ran"]


def test_a_slowdown_in_a_module_the_body_imports_by_name(gp, monkeypatch, tmp_path_factory):
    """importlib.import_module inside the test body: the base body's call is served from
    REF's tree by the loader."""
    body = '    LAUNCHES = importlib.import_module("counts").LAUNCHES\n'
    files = {"counts.py": "LAUNCHES = 1\n"}
    repository(gp, monkeypatch, tmp_path_factory, test=TEST.format(arguments="", body=body),
               files=files)  # fmt: skip
    edit(gp, "counts.py", "LAUNCHES = 1", "LAUNCHES = 2")
    compare(gp).assert_outcomes(failed=1)
    found = comparison(gp)
    assert_regressed(found, ["counts.py"])
    assert "ran" in ways(found)["counts.py"]


PATH_BODY = """\
    place = Path(__file__).parent / "loaded" / "counts.py"
    spec = importlib.util.spec_from_file_location("loaded_counts", place)
    counts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(counts)
    LAUNCHES = counts.LAUNCHES
"""


def test_a_slowdown_in_a_module_loaded_from_a_path_beside_the_test(
    gp, monkeypatch, tmp_path_factory
):
    """spec_from_file_location on a path made from the test file's own `__file__`: the base
    test module lies in REF's tree, so its path leads to REF's version of the file."""
    files = {"loaded/counts.py": "LAUNCHES = 1\n"}
    repository(gp, monkeypatch, tmp_path_factory, test=TEST.format(arguments="", body=PATH_BODY),
               files=files)  # fmt: skip
    edit(gp, "loaded/counts.py", "LAUNCHES = 1", "LAUNCHES = 2")
    compare(gp).assert_outcomes(failed=1)
    found = comparison(gp)
    assert_regressed(found, ["loaded/counts.py"])
    assert ways(found)["loaded/counts.py"] == ["ran", "opened"]


DEEP_TEST = f"""\
import mykern

N = {N}


def test_first(gpu_bench, launches):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    gpu_bench.run(mykern.make(gpu_bench, kernel, N, launches), bytes=3 * 4 * N, name="op")


def test_second(gpu_bench, launches):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    gpu_bench.run(mykern.make(gpu_bench, kernel, N, launches), bytes=3 * 4 * N, name="op")
"""


def test_a_slowdown_in_a_module_scoped_fixture_two_directories_up(
    gp, monkeypatch, tmp_path_factory
):
    """The fixture is module-scoped, in the conftest.py two directories above the test: the
    second test gets the value made for the first, and its own recording never sees the
    fixture run; the file that defines it is compared all the same, and both regress."""
    files = {"perf/ops/test_deep.py": DEEP_TEST}
    conftest = FIXTURE.format(scope='(scope="module")')
    repository(gp, monkeypatch, tmp_path_factory, test="", files=files, conftest=conftest)
    edit(gp, "conftest.py", "return 1", "return 2")
    compare(gp).assert_outcomes(failed=2)
    for name in ("test_first", "test_second"):
        found = comparison(gp, f"perf/ops/test_deep.py::{name}")
        assert_regressed(found, ["conftest.py"])
        assert "fixtures" in ways(found)["conftest.py"]


def test_unchanged_code_is_the_same_code_and_names_the_files_compared(
    gp, monkeypatch, tmp_path_factory
):
    """Nothing changed: "same code", not timed, and the row says which files were compared
    and how each came in."""
    test = TEST.format(arguments=", launches", body="    LAUNCHES = launches\n")
    repository(gp, monkeypatch, tmp_path_factory, test=test, conftest=FIXTURE.format(scope=""))
    gp.baseline("mi300x-sim", [STORED_90])  # switched off by a complete "same code"
    result = compare(gp, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "note: A/B: the test's Python is the same at HEAD: not timed *",
            "gpuperf: test_op.py::test_op: same code at HEAD, not timed: 4 files compared: "
            "conftest.py (ran, fixtures), mykern.py (imported, ran), test_op.py (imported, "
            "ran), vadd.hip (opened, kernel)",
        ]
    )
    found = comparison(gp)
    assert found["state"] == "unchanged" and found["pairs"] == 0 and found["incomplete"] == ""
    assert sorted(ways(found)) == ["conftest.py", "mykern.py", "test_op.py", "vadd.hip"]


# A profiler that holds the interpreter's hook while each test runs: cProfile through
# sys.setprofile on 3.10/3.11, the two sys.monitoring tool ids the recorder may use on 3.12+.
HOLDER = """

import sys

if sys.version_info < (3, 12):
    import cProfile

    held = cProfile.Profile()

    def pytest_runtest_logstart(nodeid, location):
        held.enable()

    def pytest_runtest_logfinish(nodeid, location):
        held.disable()
else:
    def pytest_runtest_logstart(nodeid, location):
        sys.monitoring.use_tool_id(3, "another tool")
        sys.monitoring.use_tool_id(4, "yet another tool")

    def pytest_runtest_logfinish(nodeid, location):
        sys.monitoring.free_tool_id(3)
        sys.monitoring.free_tool_id(4)
"""


def test_a_set_the_run_could_not_record_is_timed_and_the_stored_baseline_gates(
    gp, monkeypatch, tmp_path_factory
):
    """Another profiler holds the hook the recorder needs: the files compared may not be all
    the test ran, so their being the same proves nothing. The pair is timed (and passes: the
    code is the same), and the stored baseline, which the callable misses, still gates."""
    test = TEST.format(arguments="", body="    LAUNCHES = 1\n")
    repository(gp, monkeypatch, tmp_path_factory, test=test, conftest=HOLDER)
    gp.baseline("mi300x-sim", [STORED_90])
    result = compare(gp, "-v")
    result.assert_outcomes(failed=1)
    verdict = gp.report()["results"][0]["verdict"]
    found = verdict["comparison"]
    assert found["state"] in ("pass", "inconclusive") and found["pairs"] > 0
    held = "sys.setprofile is held" if sys.version_info < (3, 12) else "tool ids 4 and 3"
    assert held in found["incomplete"]
    assert verdict["baseline"]["gating"] is True and verdict["baseline"]["outcome"] == "regressed"
    result.stdout.fnmatch_lines([f"*A/B: timed although no file compared differs*{held}*"])


SYS_EXIT_TEST = "import sys\n\nsys.exit('not at this revision')\n"


def test_sys_exit_in_the_base_test_module_is_no_base_in_one_line(gp, monkeypatch, tmp_path_factory):
    """The base revision's test module calls sys.exit() as it is imported: head's test is
    not ended by a SystemExit traceback; no base, one line, and the stored baseline judges."""
    test = TEST.format(arguments="", body="    LAUNCHES = 1\n")
    repository(gp, monkeypatch, tmp_path_factory, test=SYS_EXIT_TEST + test)
    (gp.path / "test_op.py").write_text(test)
    gp.baseline("mi300x-sim", [STORED_90])
    result = compare(gp)
    result.assert_outcomes(failed=1)
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*raise SystemExit*")
    verdict = gp.report()["results"][0]["verdict"]
    assert verdict["comparison"]["state"] == "no-base"
    assert verdict["comparison"]["detail"] == "at HEAD: SystemExit: not at this revision"
    assert verdict["baseline"]["outcome"] == "regressed" and verdict["baseline"]["gating"]


# A yield fixture that logs its set-up and teardown, with the launch count it gives.
LOGGED_FIXTURE = """

import os

import pytest


@pytest.fixture
def launches():
    with open(os.environ["FIXTURE_LOG"], "a") as log:
        log.write("up {count}\\n")
    yield {count}
    with open(os.environ["FIXTURE_LOG"], "a") as log:
        log.write("down {count}\\n")
"""


def test_a_yield_fixture_at_the_base_is_torn_down_on_success(gp, monkeypatch, tmp_path_factory):
    """Base's yield fixture is advanced once per base load and finished when the test ends
    (its callable is called again by the confirmation round): after a regression, the first
    round and the confirmation each made and finished one."""
    log = gp.path / "fixture.log"
    monkeypatch.setenv("FIXTURE_LOG", str(log))
    test = TEST.format(arguments=", launches", body="    LAUNCHES = launches\n")
    repository(gp, monkeypatch, tmp_path_factory, test=test,
               conftest=LOGGED_FIXTURE.format(count=1))  # fmt: skip
    (gp.path / "conftest.py").write_text(INNER_CONFTEST + LOGGED_FIXTURE.format(count=2))
    compare(gp).assert_outcomes(failed=1)
    assert comparison(gp)["state"] == "regressed"
    said = log.read_text().splitlines()
    assert said.count("up 1") == said.count("down 1") == 2  # base's, one a load
    assert said.count("up 2") == said.count("down 2") == 1  # head's
    assert said[-1] == "down 1" or said[-1] == "down 2"


def test_a_yield_fixture_at_the_base_is_torn_down_when_there_is_no_base(
    gp, monkeypatch, tmp_path_factory
):
    """Base's body fails after its fixture was made: no base, and its teardown ran at once."""
    log = gp.path / "fixture.log"
    monkeypatch.setenv("FIXTURE_LOG", str(log))
    test = TEST.format(arguments=", launches", body="    LAUNCHES = launches\n")
    failing = test.replace("    op = mykern", "    raise RuntimeError('broken')\n    op = mykern")
    repository(gp, monkeypatch, tmp_path_factory, test=failing,
               conftest=LOGGED_FIXTURE.format(count=1))  # fmt: skip
    (gp.path / "test_op.py").write_text(test)
    (gp.path / "conftest.py").write_text(INNER_CONFTEST + LOGGED_FIXTURE.format(count=2))
    compare(gp).assert_outcomes(passed=1)
    found = comparison(gp)
    assert found["state"] == "no-base" and found["detail"] == "at HEAD: RuntimeError: broken"
    said = log.read_text().splitlines()
    assert said.count("up 1") == said.count("down 1") == 1
    assert said.index("down 1") < said.index("down 2")  # at once, before head's own teardown


PARAMETRIZED = """

import pytest


@pytest.fixture(params=[1])
def launches(request):
    return request.param
"""


def test_a_changed_parametrized_fixture_is_no_base_in_one_line(gp, monkeypatch, tmp_path_factory):
    """request.param belongs to head's test item: base's value cannot be made; one line says
    so, and the stored gate applies."""
    test = TEST.format(arguments=", launches", body="    LAUNCHES = launches\n")
    repository(gp, monkeypatch, tmp_path_factory, test=test, conftest=PARAMETRIZED)
    edit(gp, "conftest.py", "return request.param", "return request.param * 2")
    gp.baseline("mi300x-sim", [{**STORED_90, "id": "test_op.py::test_op[1]"}])
    compare(gp).assert_outcomes(failed=1)
    found = comparison(gp, "test_op.py::test_op[1]")
    assert found["state"] == "no-base"
    assert "fixture 'launches' changed, and its value comes from request.param" in found["detail"]


ROOTDIR_BODY = """\
    place = request.config.rootpath / "loaded" / "counts.py"
    spec = importlib.util.spec_from_file_location("loaded_counts", place)
    counts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(counts)
    LAUNCHES = counts.LAUNCHES
"""


def test_a_path_into_the_work_tree_at_the_base_is_no_base(gp, monkeypatch, tmp_path_factory):
    """A module loaded by a path from head's rootdir: base's body would run head's changed
    version and time head against itself. No base, naming the file."""
    files = {"loaded/counts.py": "LAUNCHES = 1\n"}
    test = TEST.format(arguments=", request", body=ROOTDIR_BODY)
    repository(gp, monkeypatch, tmp_path_factory, test=test, files=files)
    edit(gp, "loaded/counts.py", "LAUNCHES = 1", "LAUNCHES = 2")
    gp.baseline("mi300x-sim", [STORED_90])
    compare(gp).assert_outcomes(failed=1)
    found = comparison(gp)
    assert found["state"] == "no-base"
    assert "opened the work tree's loaded/counts.py, which differs at HEAD" in found["detail"]


HOOKS_CHECK = """

import os
import sys

calls = []


def counting(frame, event, arg):
    calls.append(event)


def pytest_runtest_logstart(nodeid, location):
    if sys.version_info < (3, 12):
        sys.setprofile(counting)


def pytest_runtest_logfinish(nodeid, location):
    # the recorder gave the interpreter's hooks back, and chained the profile function
    tree = os.path.join(os.environ["GPUPERF_CACHE_DIR"], "trees")
    strays = [
        name for name, module in list(sys.modules.items())
        if str(getattr(module, "__file__", "")).startswith(tree)
        and not name.startswith("_gpuperf_base_")
    ]
    with open("hooks.txt", "w") as out:
        if sys.version_info < (3, 12):
            out.write(f"profile {sys.getprofile() is counting} {len(calls) > 0}\\n")
            sys.setprofile(None)
        else:
            out.write(f"tools {sys.monitoring.get_tool(3)} {sys.monitoring.get_tool(4)}\\n")
        out.write(f"strays {strays}\\n")
"""


def test_the_interpreters_hooks_and_modules_are_given_back(gp, monkeypatch, tmp_path_factory):
    """After a recorded test: a profile function set before it is set again (and was called
    meanwhile: chained), sys.monitoring's tool ids are free, and no module of REF's tree is
    left in sys.modules under a name of head's."""
    test = TEST.format(arguments=", launches", body="    LAUNCHES = launches\n")
    repository(gp, monkeypatch, tmp_path_factory, test=test,
               conftest=FIXTURE.format(scope="") + HOOKS_CHECK)  # fmt: skip
    edit(gp, "conftest.py", "return 1", "return 2")
    compare(gp).assert_outcomes(failed=1)
    assert comparison(gp)["state"] == "regressed"
    checked = (gp.path / "hooks.txt").read_text().splitlines()
    if sys.version_info < (3, 12):
        assert checked[0] == "profile True True"
    else:
        assert checked[0] == "tools None None"
    assert checked[1] == "strays []"


HELPER_BY_NAME = f"""\
import importlib

import mykern

N = {N}
NAME = "helper"  # not a literal at the call: only the recording sees the import


def test_first(gpu_bench):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    launches = importlib.import_module(NAME).launches()
    gpu_bench.run(mykern.make(gpu_bench, kernel, N, launches), bytes=3 * 4 * N, name="op")


def test_second(gpu_bench):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    launches = importlib.import_module(NAME).launches()
    gpu_bench.run(mykern.make(gpu_bench, kernel, N, launches), bytes=3 * 4 * N, name="op")
"""


def test_code_an_earlier_test_ran_is_recorded_again(gp, monkeypatch, tmp_path_factory):
    """The second test calls the helper the first one imported and ran: its own recording
    still sees it (on 3.12+ sys.monitoring's DISABLE silenced the helper's code until the
    next recording restarted the events)."""
    files = {"helper.py": "def launches():\n    return 1\n", "test_twice.py": HELPER_BY_NAME}
    repository(gp, monkeypatch, tmp_path_factory, test="", files=files)
    edit(gp, "helper.py", "return 1", "return 2")
    compare(gp).assert_outcomes(failed=2)
    for name in ("test_first", "test_second"):
        assert comparison(gp, f"test_twice.py::{name}")["changed_files"] == ["helper.py"]
