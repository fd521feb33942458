"""What the fixture hands the gate: a kernel's measurement and a callable's carry the same
device facts (the caches a hot floor is warned about, the device's own peak), and each has
its recipe at the same position, where a confirming round looks for it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pytest_gpuperf.config.settings import Settings, TestSettings
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.session.bench_session import BenchSession
from pytest_gpuperf.session.fixture import GpuBench

KERNEL = Path(__file__).resolve().parents[2] / "kernels" / "vector_add.hip"
N = 1 << 16


def test_a_kernel_and_a_callable_reach_the_gate_with_the_same_device_facts(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPERF_LOCK_DIR", str(tmp_path / "locks"))  # not the machine's GPU lock
    session = BenchSession(
        Settings(backends=("sim",), measure=True, budget_s=0.05),
        rootdir=tmp_path,
        opener=lambda name, index, **options: open_backend(name, index, seed=3, **options),
    )
    device = session.device()
    bench = GpuBench(session, device, TestSettings("t.py::t", budget_s=0.05, peak_bps=1e12))
    try:
        kernel = bench.kernel(KERNEL, "vector_add")
        a = np.ones(N, dtype=np.float32)
        args = (bench.to_device(a), bench.to_device(a), bench.empty(N), N)
        bench(kernel, grid=N // 256, block=256, args=args, bytes=12 * N, name="kernel")
        bench.run(
            lambda: device.backend.launch(kernel, N // 256, 256, args),
            bytes=12 * N,
            cache="hot",
            name="callable",
        )
        taken, recipes = bench._taken, bench._recipes
        assert [t.measurement.name for t in taken] == [r.label for r in recipes]
        assert [r.label for r in recipes] == ["kernel", "callable"]
        facts = {(t.cache_bytes, t.device_peak_bps) for t in taken}
        spec = device.match.spec
        # the device's own peak, not the test's peak_gbps (1 TB/s) the efficiency is against
        expected = (max(int(spec.cache_bytes), int(device.info.l2_bytes)), spec.peak_bps)
        assert facts == {expected} and expected[0] > 0 and expected[1] != 1e12
    finally:
        bench.close()
        session.close()
