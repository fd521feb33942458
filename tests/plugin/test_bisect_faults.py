"""`gpuperf bisect` against what goes wrong around a search, on the simulated
device: an edit the simulated device cannot time, report paths that must not be written
(checked before the first probe), numbers no search can use, SIGTERM mid-probe, the user's
`.pytest_cache` and uncommitted edits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.git_repo import git
from tests.plugin.test_bisect import PYTEST_ARGS, REPO, bisect, make_project, steps_at
from tests.plugin.test_save_faults import ctrl_c_as_a_terminal_delivers_it

PREFIX = "gpuperf bisect: error: "


@pytest.fixture
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def small_project(tmp_path):
    make_project(tmp_path, steps_at(3, {2: 0.6}))
    return tmp_path


def test_an_edit_the_simulated_device_cannot_time_is_not_measured(tmp_path, cache):
    """Kernel bodies edited without a `gpuperf-sim:` directive: every probe is GOOD's model.
    It ended `culprit: none (BAD is not slower ... 95% CI 1.0000-1.0000): modelled)`, exit 1."""
    make_project(tmp_path, steps_at(3, {}))
    kernel = tmp_path / "kernels" / "vadd.hip"
    lines = [line for line in kernel.read_text().splitlines() if "gpuperf-sim" not in line]
    kernel.write_text("\n".join(lines) + "\n")
    git(tmp_path, "commit", "-qam", "GOOD without a directive")
    good = kernel.read_text()
    for index in range(3):
        body = f"c[i] = a[i] + b[i] + {index} * 0;"
        kernel.write_text(good.replace("c[i] = a[i] + b[i];", body))
        git(tmp_path, "commit", "-qam", f"edit {index}")
    done = bisect(
        tmp_path,
        "HEAD~3",
        "HEAD",
        "--budget",
        "0.02",
        "--json",
        "b.json",
        *PYTEST_ARGS,
        cache=cache,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("culprit: not measured (BAD was not timed: ")
    assert "CI" not in last and "not slower" not in last and "`gpuperf-sim:` directive" in last
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["culprit"] is None and report["unmeasured"] in last
    assert report["probes"][0]["state"] == "modelled" and report["probes"][0]["ratio_ci"] is None


@pytest.mark.parametrize("target", ["baseline", "directory", "fifo", "/dev/full", "junit"])
def test_a_json_path_that_must_not_be_written_stops_before_the_first_probe(
    small_project, cache, target
):
    baselines = small_project / "baselines"
    baselines.mkdir()
    baseline = baselines / "mi300x-sim.toml"
    baseline.write_text("# the team's baselines\n")
    git(small_project, "add", "-A")
    git(small_project, "commit", "-qm", "baselines")
    path = {
        "baseline": "baselines/mi300x-sim.toml",
        "directory": "baselines",
        "fifo": "pipe",
        "/dev/full": "/dev/full",
        "junit": "junit.xml",  # every probe writes it: --junitxml=junit.xml after --
    }[target]
    extra = ("--junitxml=junit.xml",) if target == "junit" else ()
    if target == "fifo":
        os.mkfifo(small_project / "pipe")
    began = time.monotonic()
    done = bisect(
        small_project, "HEAD~4", "HEAD", "--json", path, *PYTEST_ARGS, *extra, cache=cache
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"{PREFIX}--json {path}: ")
    assert "choose another path" in done.stderr and "bisect: probe" not in done.stderr
    assert baseline.read_text() == "# the team's baselines\n"
    assert time.monotonic() - began < 60  # no probe ran (each is a pytest process)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--budget", "1e308"), "--budget: the budget must be a number of seconds in (0, 86400]"),
        (("--budget", "1000"), "--budget 1000 with --rounds 3: the last round would sample"),
        (("--budget", "inf"), "--budget: the budget in seconds must be a finite number"),
        (("--rounds", "99"), "--rounds: expected 1 to 8 runs per probe, got 99"),
        (
            ("--rounds", "9" * 5000),
            "--rounds: expected a whole number of up to 6 digits, got '9999999999",
        ),
        (("--max-probes", "100000"), "--max-probes: expected 2 to 1000, got 100000"),
        (("--probe-timeout", "nan"), "--probe-timeout: the timeout must be a finite number"),
        (("--probe-timeout", "0"), "--probe-timeout: expected 0 < seconds"),
    ],
)
def test_numbers_no_search_can_use_are_one_line(small_project, cache, args, message):
    done = bisect(small_project, "HEAD~3", "HEAD", *args, *PYTEST_ARGS, cache=cache)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(PREFIX)
    assert message in done.stderr, done.stderr


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="looks for the probe in /proc")
@pytest.mark.parametrize(
    ("signum", "status", "words"),
    [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")],
)
@pytest.mark.slow
def test_a_signal_stops_the_probe_removes_its_files_and_says_so(
    signum, status, words, small_project, cache, tmp_path_factory
):
    """It exited 143 silently, left gpuperf-bisect-*/probe.json and the probe's pytest
    running (on a GPU, holding the GPU lock)."""
    scratch = tmp_path_factory.mktemp("tmp")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        GPUPERF_CACHE_DIR=str(cache),
        GPUPERF_LOCK_DIR=str(cache / "locks"),
        TMPDIR=str(scratch),
    )
    command = [
        sys.executable,
        "-m",
        "pytest_gpuperf.commands",
        "bisect",
        "HEAD~3",
        "HEAD",
        "--budget",
        "30",
    ]
    bisection = subprocess.Popen(
        [*command, *PYTEST_ARGS], cwd=small_project, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_a_terminal_delivers_it,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not _processes_naming(f"--gpuperf-json={scratch}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_naming(f"--gpuperf-json={scratch}"), "the probe never started"
    time.sleep(1.0)
    bisection.send_signal(signum)
    _, stderr = bisection.communicate(timeout=60)
    assert bisection.returncode == status
    assert stderr.strip().splitlines()[-1] == (
        f"gpuperf bisect: stopped by {words}: the running probe was stopped, "
        "its files removed; no --json written"
    )
    assert "Traceback" not in stderr
    assert not _processes_naming(f"--gpuperf-json={scratch}")  # no probe left running
    assert list(scratch.glob("gpuperf-bisect-*")) == []  # no probe.json left behind


def test_probes_leave_the_pytest_cache_alone_and_uncommitted_edits_are_named(small_project, cache):
    """Probes rewrote the user's .pytest_cache (its last-failed list), and used uncommitted
    test edits without a word."""
    test_file = small_project / "test_vadd.py"
    test_file.write_text(test_file.read_text() + "\n# a local edit\n")
    args = ["--", "-q", "-p", "pytest_gpuperf.plugin", "--gpuperf-backend=sim", "test_vadd.py"]
    done = bisect(small_project, "HEAD~3", "HEAD", "--budget", "0.02", *args, cache=cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (small_project / ".pytest_cache").exists()
    said = [line for line in done.stderr.splitlines() if "uncommitted" in line]
    assert said == [
        "bisect: every probe runs the work tree's uncommitted changes to test_vadd.py (the "
        "tests are the work tree's; the kernels are each commit's)"
    ]
