"""The lab bench: what the benchmark scripts of bench/ share, so that each script holds its
experiment and nothing else (docs/benchmarks.md says what each one measured).

  runs        raw runs: scratch folders outside the repository, a run's JSON written
              atomically and read back (raw runs are CI artifacts and release assets)
  tables      plain-text and Markdown tables, sizes and percentages, a document's section
  children    this interpreter's children: JSON-line workers, any command killed with its
              process group when its time is up
  pytest_runs separate pytest processes with the plugin of a chosen tree, each one's
              --gpuperf-json report read through the plugin's one reader (and its JUnit XML)
  projects    the throwaway git projects those processes run in, a real library's releases
              vendored into one
  kernels     the kernels the benchmarks time and the simulated device's models of them
  devices     the backends a script may name, a device opened the library's way
  cli         the options the scripts share (--backend, --out, --render, --markdown; the
              bounds and deadline of bounded processes)

A script runs as `python bench/NAME.py`, so bench/ is first on sys.path and `from lab import
...` resolves; lab puts the checkout's root next, so that a script measures this checkout's
plugin. Nothing here decides what the gate decides: the scripts call pytest_gpuperf.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNELS_DIR = REPO_ROOT / "kernels"
if str(REPO_ROOT) not in sys.path:  # this checkout's pytest_gpuperf and tests/, first
    sys.path.insert(1, str(REPO_ROOT))
