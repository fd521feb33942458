"""Models of your own kernels for the simulated device (`--gpuperf-backend=sim`).

The simulated device runs no kernel code. For the plugin's own kernels (kernels/ in the
package) it knows what they compute; for yours it needs a model, registered here, usually
from a conftest.py:

    from pytest_gpuperf import simulate

    @simulate.model("kernels/transpose.hip", "transpose_naive",
                    traffic_bytes=lambda args: args[0].nbytes + args[1].nbytes,
                    efficiency=0.45)
    def transpose_naive(args, launch):
        src, dst, rows, cols = args
        dst[: rows * cols] = src[: rows * cols].reshape(rows, cols).T.ravel()

A model is keyed by the kernel's source file (an absolute path; a relative one is resolved
against the directory of the module that registers it) and the kernel's name, never by the
name alone: a kernel called `copy` in your file is yours, not the plugin's. A kernel launched
without a model leaves its outputs as they were, and the simulated device warns once with a
`SimulationWarning`. docs/simulated-device.md has the whole story.

This package is also the simulated device itself, a documented, seeded model of a GPU for
tests and demos without one. The backend registry (runtime/__init__.py) opens it as "sim"
through `device.open()`; its modules answer one question each:

- device.py: `open()`, the settings it builds, and the names tests import;
- device_model.py: the parameters (`SimSettings`), the noise (device-wide, buffer placement and
  per-module-load code parts of the run drift, plus per-launch jitter), the caches and the
  time of a launch;
- backend.py: `SimBackend`, the Backend interface (memory, compile, launch, events), and
  the module loads that each draw their own code drift;
- execute.py: what a launch computes (registered models, the shipped kernels) and which
  bytes it touches;
- shipped_kernels.py, input_hash.py: what the plugin's own kernels compute, in NumPy, and the
  inputs gpuperf_check.hip's hash makes, bit for bit;
- source.py: `check_source` (what a compiler would fail on first), the gpuperf-sim
  directives, and the code object a kernel's fingerprint hashes;
- kernel_models.py: the registry of users' models behind the names above.

Importing this package imports neither pytest, nor a GPU runtime, nor NumPy: only
kernel_models.py. docs/simulated-device.md explains every parameter and formula. Everything
the device reports says "simulated".
"""

from __future__ import annotations

# The names imported `as` themselves stay importable from here, outside __all__, as before:
# the types of a model's functions, and the checks the simulated device makes with them.
from pytest_gpuperf.simulate.kernel_models import Compute as Compute
from pytest_gpuperf.simulate.kernel_models import (
    KernelModel,
    LaunchShape,
    SimulationWarning,
    lookup,
    model,
    models,
    register,
    scoped,
    unregister,
)
from pytest_gpuperf.simulate.kernel_models import TrafficBytes as TrafficBytes
from pytest_gpuperf.simulate.kernel_models import check_traffic as check_traffic
from pytest_gpuperf.simulate.kernel_models import missing_model_message as missing_model_message

__all__ = [
    "KernelModel",
    "LaunchShape",
    "SimulationWarning",
    "lookup",
    "model",
    "models",
    "register",
    "scoped",
    "unregister",
]
