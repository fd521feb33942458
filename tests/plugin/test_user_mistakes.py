"""A mistake in a test is the user's line and our message, not the plugin's stack.

Each mistake a kernel author makes first (a kernel file that is not there, a misspelt kernel
name, an argument too few, no declared bytes) raises one of our errors deep inside the
plugin. The report shows the test's own frame, the line that made the mistake and the
message; --fulltrace still shows every frame. A grid too small for the data is named as such,
never blamed on in-place updates that repeated launches would repeat.
"""

from __future__ import annotations

import re

import pytest

MISTAKES = {
    "missing_file": ('gpu_bench.kernel("nope.hip", "vector_add")', "kernel source 'nope.hip'"),
    "wrong_name": ('gpu_bench.kernel("vadd.hip", "vector_ad")', "no kernel named 'vector_ad'"),
    "wrong_argc": (
        "gpu_bench(k, grid=N // 256, block=256, args=(x, x, y), reads=(x,), writes=(y,))",
        "takes 4 arguments",
    ),
    "no_bytes": (
        "gpu_bench(k, grid=N // 256, block=256, args=(x, x, y, N))",
        "declare the bytes the kernel must move",
    ),
}

BODY = """
N = 1 << 16


def test_{name}(gpu_bench):
    k = gpu_bench.kernel("vadd.hip", "vector_add")
    x = gpu_bench.to_device(np.ones(N, np.float32))
    y = gpu_bench.empty(N)
    {line}
"""


def _failure_section(output: str, name: str) -> str:
    start = output.index(f" test_{name} ")
    end = output.index("short test summary", start) if "short test summary" in output else None
    return output[start:end]


@pytest.mark.parametrize("measure", [True, False], ids=["measuring", "smoke"])
@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_mistake_shows_the_users_line_and_the_message_only(gp, name, measure):
    line, message = MISTAKES[name]
    gp.test_file(BODY.format(name=name, line=line))
    result = gp.run(*(["--gpuperf"] if measure else []))
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    section = _failure_section(output, name)
    assert message in section
    assert line in section
    assert "pytest_gpuperf/" not in section, section  # none of the plugin's frames
    assert re.search(r"test_perf\.py:\d+: \w+", section)  # pytest's location line: the user's
    assert len(section.splitlines()) < 20, section


def test_fulltrace_still_shows_the_plugins_frames(gp):
    line, _ = MISTAKES["wrong_argc"]
    gp.test_file(BODY.format(name="wrong_argc", line=line))
    result = gp.run("--gpuperf", "--fulltrace")
    result.assert_outcomes(failed=1)
    assert "pytest_gpuperf/runtime/signature.py" in result.stdout.str()


def test_a_bug_in_the_plugin_keeps_its_whole_traceback(gp):
    """Only our deliberate errors lose our frames: anything else is a bug to report whole."""
    gp.test_file(
        """
        def test_bug(gpu_bench, monkeypatch):
            import pytest_gpuperf.session.fixture as fixture

            # a broken plugin: a TypeError inside kernel()
            monkeypatch.setattr(fixture, "resolve_kernel_path", None)
            gpu_bench.kernel("vadd.hip", "vector_add")
        """
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    assert "pytest_gpuperf/session/fixture.py" in result.stdout.str()


SMALL_GRID = """
def test_small_grid(gpu_bench):
    k = gpu_bench.kernel("vadd.hip", "vector_add")
    n = 1 << 16
    a = np.arange(n, dtype=np.float32)
    da, dc = gpu_bench.to_device(a), gpu_bench.empty(n)
    gpu_bench(k, grid=n // 512, block=256, args=(da, da, dc, n), reads=(a, a), writes=(a,))
    np.testing.assert_allclose(gpu_bench.from_device(dc, np.float32, n), 2 * a)
"""


def test_a_grid_too_small_is_named_not_blamed_on_in_place_updates(gp):
    gp.test_file(SMALL_GRID)
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "32,768 of 65,536 elements of gpu_bench.empty #1 still hold its 0xFF fill" in output
    assert "Does the grid cover every element?" in output
    assert "vector_add on grid 128 x block 256" in output
    assert "in place" not in output


def test_an_in_place_update_repeated_by_measuring_still_gets_its_hint(gp):
    """The other cause keeps its advice: every element written, too many times."""
    gp.test_file(
        """
        def test_twice(gpu_bench):
            k = gpu_bench.kernel("vadd.hip", "vector_add")
            n = 1 << 16
            a = np.ones(n, dtype=np.float32)
            da = gpu_bench.to_device(a)
            gpu_bench(k, grid=n // 256, block=256, args=(da, da, da, n), reads=(a,), writes=(a,))
            np.testing.assert_allclose(gpu_bench.from_device(da, np.float32, n), 2 * a)
        """
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "in place" in output
    assert "no launch wrote" not in output
