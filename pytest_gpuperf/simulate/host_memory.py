"""The host memory behind the simulated device's buffers: what is available, and how much of
it a buffer may take (the rest of the machine needs some).

A simulated buffer is a host array, calloc'd: its pages use memory only once written, so a
buffer is checked at its first write (simulate/backend.py), not at its allocation.
"""

from __future__ import annotations

import os

# Host memory kept free when backing simulated buffers: the process, the test session and
# the rest of the machine need some (the largest of the two).
HOST_MARGIN_BYTES = 512 * 2**20
HOST_MARGIN_FRACTION = 0.10
# Buffers smaller than this are not checked against the host's memory (no /proc read).
HOST_CHECK_FROM_BYTES = 64 * 2**20


def host_available_bytes() -> int | None:
    """Host memory available to new allocations: MemAvailable from /proc/meminfo (Linux),
    else free physical pages (os.sysconf), else None (unknown: not checked)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
