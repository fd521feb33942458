"""The degraded-GPU probe runs in the controller's background while the workers start; a
worker waits for its findings only when it opens its GPU (session/probe_handoff.py)."""

from __future__ import annotations

import os
import stat
import threading
import time

import pytest

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.session.gpu_probe import GpuProbe, ProbeReport
from pytest_gpuperf.session.probe_handoff import ProbeInBackground, wait_for_probe


def _report() -> ProbeReport:
    gpus = tuple(
        GpuProbe(index, "NVIDIA H200", f"0000:0{index}:00.0", f"GPU-{index}", bw, 0.004, 0.3)
        for index, bw in ((0, 4.0e12), (1, 3.5e12))
    )
    return ProbeReport("cuda", 0.03, gpus, refused=(1,))


def test_the_probe_runs_while_the_caller_goes_on_and_the_worker_reads_its_findings():
    release = threading.Event()

    def probe():
        release.wait(5)
        return _report()

    handoff = ProbeInBackground(probe)
    try:
        assert not handoff.path.exists()  # started, not waited for
        assert stat.S_IMODE(handoff.folder.stat().st_mode) == 0o700
        release.set()
        found = wait_for_probe(handoff.path, os.getppid())
        assert found == handoff.result() == _report()
        assert found.refused == (1,)
    finally:
        handoff.close()
    assert not handoff.folder.exists()


def test_no_probe_to_run_hands_over_none():
    handoff = ProbeInBackground(lambda: None)
    try:
        assert wait_for_probe(handoff.path, None) is None
        assert handoff.result() is None
    finally:
        handoff.close()


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (GpuPerfError("GPU 1: hipErrorOutOfMemory"), "GPU 1: hipErrorOutOfMemory"),
        (RuntimeError("a bug"), "RuntimeError: a bug"),  # still written: no worker waits forever
    ],
)
def test_a_failed_probe_is_one_line_for_the_controller_and_every_worker(raised, said):
    def probe():
        raise raised

    handoff = ProbeInBackground(probe)
    try:
        with pytest.raises(GpuPerfError, match=f"^degraded-GPU probe: {said}$"):
            wait_for_probe(handoff.path, None)
        with pytest.raises(GpuPerfError, match=f"^{said}$"):
            handoff.result()
    finally:
        handoff.close()


def test_a_worker_whose_controller_is_gone_stops_waiting(tmp_path):
    with pytest.raises(GpuPerfError, match="controller ended before its degraded-GPU probe"):
        wait_for_probe(tmp_path / "never.json", controller_pid=os.getppid() + 1)


def test_damaged_findings_are_one_line_naming_the_file(tmp_path):
    findings = tmp_path / "probe.json"
    findings.write_text('{"report": null, "error": NaN}')
    with pytest.raises(GpuPerfError, match=r"probe\.json"):
        wait_for_probe(findings, None)


def test_a_run_that_ends_before_its_probe_does_not_wait_for_it_and_leaves_no_folder():
    """A collection error or Ctrl-C ends the run while the probe may still wait for another
    run's GPU lock: closing neither waits for it nor leaves the private folder behind, and the
    probe's late write is dropped without an error."""
    release = threading.Event()

    def probe():
        release.wait(5)
        return _report()

    handoff = ProbeInBackground(probe)
    started = time.monotonic()
    handoff.close()  # the probe is still waiting: close does not wait for it
    assert time.monotonic() - started < 2.0
    assert not handoff.folder.exists()
    release.set()
    handoff._thread.join(5)  # its write found no folder: dropped, nothing raised
    assert not handoff._thread.is_alive() and not handoff.folder.exists()
