"""Counting GPUs, naming them and sharing one between xdist workers, on a real NVIDIA GPU
through the real cuda module (the hip backend's count and identity on the HIP-over-CUDA shim
are in test_hip_shim.py). Skips without a GPU."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.errors import DeviceUnavailable
from pytest_gpuperf.session.device import device_count
from tests.toolchains import GPU, skip_or_fail

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
COUNT = (
    "from pytest_gpuperf.session.device import device_count\n"
    "try:\n    print(device_count('cuda'))\n"
    "except Exception as problem:\n    print(type(problem).__name__, problem)\n"
)


def cuda_count_or_skip() -> int:
    try:
        return device_count("cuda")
    except (DeviceUnavailable, ImportError) as missing:
        skip_or_fail(GPU, f"needs a GPU through the cuda backend: {missing}")


def child_count(**env: str) -> str:
    environment = {**os.environ, **env}
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, (str(REPO), os.environ.get("PYTHONPATH")))
    )
    done = subprocess.run(
        [sys.executable, "-c", COUNT], env=environment, capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def test_cuda_counts_what_the_visible_device_mask_leaves():
    count = cuda_count_or_skip()  # before the import: a machine without cuda-bindings skips
    from cuda.bindings import driver

    err, direct = driver.cuDeviceGetCount()
    assert err == driver.CUresult.CUDA_SUCCESS and count == direct >= 1
    assert child_count(CUDA_VISIBLE_DEVICES="0") == "1"
    assert child_count(CUDA_VISIBLE_DEVICES="").startswith("DeviceUnavailable")


def test_cuda_names_its_gpu(cuda_backend):
    info = cuda_backend.info
    assert re.fullmatch(
        r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d", info.pci_bus_id or ""
    )
    assert re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", info.uuid or ""), (
        info.uuid
    )


def test_two_workers_on_one_gpu_take_turns(tmp_path):
    """-n 2 with one visible GPU: both workers on one bus id, and no two measurements' GPU
    work overlaps in time (the GPU lock serialises them)."""
    for module in ("xdist", "tomli_w"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module}")
    cuda_count_or_skip()
    report = tmp_path / "n2.json"
    first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
    environment = {**os.environ, "CUDA_VISIBLE_DEVICES": first}  # one GPU, whatever the host has
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, (str(REPO), os.environ.get("PYTHONPATH")))
    )
    environment["GPUPERF_LOCK_DIR"] = str(tmp_path / "locks")
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2",
        "--gpuperf", "--gpuperf-backend=cuda", f"--gpuperf-json={report}",
        "--gpuperf-budget=0.2", "-k", "vector_add or stream", "tests/perf",
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=REPO, env=environment, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    document = json.loads(report.read_text())
    assert len(document["devices"]) == 1
    device = document["devices"][0]
    assert device["workers"] == ["gw0", "gw1"] and device["pci_bus_id"]
    assert device["lock_held_s"] > 0
    spans = sorted(
        (r["measurement"]["started_s"], r["measurement"]["ended_s"]) for r in document["results"]
    )
    assert {r["measurement"]["gpu"]["pci_bus_id"] for r in document["results"]} == {
        device["pci_bus_id"]
    }
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, "two measurements on one GPU overlapped"
