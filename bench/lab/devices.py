"""Which device a script measures: the backends it may name, and a device opened the
library's way (pytest_gpuperf.open_device, as a user's script opens one), its match note
said once on stderr. A simulated device's numbers are the model's: every script labels them
SIMULATED."""

from __future__ import annotations

import sys
from typing import Any

from lab.children import run
from lab.pytest_runs import plugin_env

BACKENDS = ("cuda", "hip", "sim")


def open_device(backend: str, device_key: str | None = None, **sim_options: Any) -> Any:
    """pytest_gpuperf's Device on `backend` (`device_key`: the datasheet to measure against,
    for the simulated device its model; `sim_options`: the simulated device's, e.g. seed)."""
    from pytest_gpuperf import open_device as library_open

    device = library_open(backend, device=device_key, **(sim_options if backend == "sim" else {}))
    if device.warning:
        print(f"note: {device.warning}", file=sys.stderr)
    return device


def device_name(backend: str) -> str:
    """The device's own name as a separate process opens it (the measuring processes'
    device, not one this process holds open); the simulated device says so."""
    if backend == "sim":
        return "the SIMULATED MI300X"
    code = (
        "from pytest_gpuperf.session.api import open_device as o; "
        f"d = o({backend!r}); print(d.info.name); d.close()"
    )
    return run([sys.executable, "-c", code], env=plugin_env()).stdout.strip() or backend
