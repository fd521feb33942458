"""The explain pass's child process (explain/counters/profile.py's run_child): its output is
never held whole in the parent, and a grandchild that keeps the output open does not hold the
parent.
Issue 45 item 9: 1.5 GB of profiler output made a 4.5 GB parent (a MemoryError under a memory
limit), and a grandchild holding the output pipe made a 10 s timeout last 97 s.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

from pytest_gpuperf.explain.counters.profile import OUTPUT_TAIL_BYTES, output_tail, run_child

FLOOD = (
    "import sys\n"
    "line = 'x' * 1023 + '\\n'\n"
    "for _ in range({mib} * 1024):\n"
    "    sys.stdout.write(line)\n"
    "print('the last line')\n"
)


def test_a_flood_of_output_is_read_as_a_bounded_tail(tmp_path: Path):
    mib = 300
    before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    command = [sys.executable, "-c", FLOOD.format(mib=mib)]
    status, output, timed_out = run_child(
        command, dict(os.environ), tmp_path, 120, output_file=tmp_path / "out.txt"
    )
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_kib) / 1024
    assert (status, timed_out) == (0, False)
    assert len(output) <= OUTPUT_TAIL_BYTES
    assert output.rstrip().endswith("the last line")
    assert grown_mib < mib / 4, grown_mib  # read whole, the output alone would be 300 MiB


def test_a_grandchild_holding_the_output_does_not_hold_the_parent(tmp_path: Path):
    pid_file = tmp_path / "pid"
    script = (
        "import subprocess, sys, time\n"
        "holder = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(holder.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    began = time.monotonic()
    try:
        status, output, timed_out = run_child(
            [sys.executable, "-c", script], dict(os.environ), tmp_path, 3,
            output_file=tmp_path / "out.txt",
        )  # fmt: skip
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), 9)
    assert timed_out and status != 0
    assert "started" in output
    assert time.monotonic() - began < 30


def test_the_tail_drops_the_partial_first_line(tmp_path: Path):
    path = tmp_path / "out.txt"
    path.write_text("a" * 100 + "\nsecond\nthird\n")
    assert output_tail(path, limit_bytes=16) == "second\nthird\n"  # not "aa\nsecond..."
    assert output_tail(tmp_path / "absent") == ""
