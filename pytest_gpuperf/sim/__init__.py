"""The simulated device: a documented, seeded model of a GPU, for tests and demos without one.

The backend registry (runtime/__init__.py) opens it as "sim" through `device.open()`. The
device is built from small modules, one question each:

- device.py: `open()`, the settings it builds, and the names tests import;
- model.py: the parameters (`SimSettings`), the noise (device-wide, buffer placement and
  per-module-load code parts of the run drift, plus per-launch jitter), the caches and the
  time of a launch;
- backend.py: `SimBackend`, the Backend interface (memory, compile, launch, events), and
  the module loads that each draw their own code drift;
- execute.py: what a launch computes (registered models, the plugin's catalog) and which
  bytes it touches;
- source.py: `check_source` (what a compiler would fail on first), the gpuperf-sim
  directives, and the code object a kernel's fingerprint hashes;
- kernel_models.py: models of users' kernels, the registry behind the public
  `pytest_gpuperf.simulate`.

Importing this package imports nothing (no NumPy): `pytest_gpuperf.simulate` loads only
kernel_models.py. docs/simulated-device.md explains every parameter and formula. Everything
the device reports says "simulated".
"""
