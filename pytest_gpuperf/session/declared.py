"""What a test declares to `gpu_bench`, checked: the bytes a kernel must move, the work it must
do, the file it names.

`declared_bytes` turns `bytes=` or `reads=`/`writes=` into one byte count and refuses what
would be silently wrong (a float, a bool, nothing at all); `work_of` checks `flops=` and `math=`
and finds the roofline floors that apply (a floor on work nobody declared is refused at
setup); `resolve_kernel_path` finds the .hip file next to the test, under the rootdir or among
the shipped kernels. No pytest import here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_gpuperf.config.floors import MIN_FLOPS, MIN_ROOFLINE
from pytest_gpuperf.engine.roofline import Work, declared_work
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.roofline import WorkFloors
from pytest_gpuperf.runtime.compile import KERNELS_DIR

if TYPE_CHECKING:
    from pytest_gpuperf.config.settings import TestSettings
    from pytest_gpuperf.runtime.devices import DeviceSpec


def declared_bytes(label: str, total: Any, reads: Any, writes: Any) -> int:
    """The bytes a kernel must move: `total`, or the sizes of what it reads and writes."""
    if total is not None and (reads is not None or writes is not None):
        raise ConfigError(f"{label}: give bytes= or reads=/writes=, not both")
    if total is None and reads is None and writes is None:
        raise ConfigError(
            f"{label}: declare the bytes the kernel must move: bytes=N, or reads=(...) and "
            "writes=(...) with the arrays (or byte counts) it reads once and writes once"
        )
    if total is not None:
        return _byte_count(total, label, "bytes=")
    items = [*_as_items(reads), *_as_items(writes)]
    count = sum(_byte_count(item, label, "reads=/writes=") for item in items)
    if count <= 0:
        raise ConfigError(f"{label}: reads=/writes= declare no bytes; the kernel must move some")
    return count


def _as_items(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _byte_count(item: Any, label: str, where: str) -> int:
    """A byte count: an integer (NumPy's too, or a 0-d integral array such as sizes.sum()),
    or an object with `nbytes` (arrays, device buffers). A float, even a whole one, is
    refused: `np.float64(n)` has nbytes 8, and taking that would be silently wrong."""
    if isinstance(item, (bool, np.bool_)):
        raise ConfigError(f"{label}: {where} got {item!r}, not a byte count")
    if isinstance(item, np.ndarray) and item.ndim == 0:
        item = item[()]  # a NumPy scalar from a reduction
    if isinstance(item, (int, np.integer)):
        if item <= 0:
            raise ConfigError(f"{label}: {where} byte counts must be positive, got {item}")
        return int(item)
    if isinstance(item, (float, np.floating)):
        whole = float(item).is_integer()
        hint = f" (use int({item!r}) if it is a count)" if whole else ""
        raise ConfigError(
            f"{label}: {where} got the float {item!r}; a byte count is a whole number{hint}"
        )
    nbytes = getattr(item, "nbytes", None)  # NumPy arrays, DeviceBuffers, torch/CuPy arrays
    if isinstance(nbytes, (int, np.integer)):
        return int(nbytes)
    raise ConfigError(
        f"{label}: {where} takes arrays, device buffers or byte counts, got {type(item).__name__}"
    )


def work_of(
    test: TestSettings, spec: DeviceSpec, label: str, cache: str, flops: Any, math: Any
) -> tuple[Work | None, WorkFloors]:
    """The work measurement `label` declares (None: none) and the roofline floors of the
    test's marks that apply to it; ConfigError, one line naming the test and the measurement,
    for a declaration that cannot be right or a min_flops / min_roofline mark on a measurement
    that declared no FLOPs (a floor on nothing would pass silently)."""
    where = f"{test.test_id} [{label}]"
    work = declared_work(flops, math, device_key=spec.key, device_name=spec.name, label=where)
    flops_rule = test.floor_for(label, spec.key, cache, MIN_FLOPS)
    roofline_rule = test.floor_for(label, spec.key, cache, MIN_ROOFLINE)
    rule = flops_rule or roofline_rule
    if work is None and rule is not None:
        raise ConfigError(
            f"{where}: @pytest.mark.{rule.origin} applies to this measurement, but it declared "
            "no FLOPs: give gpu_bench(...) flops= and math= (e.g. flops=gpu_bench.gemm_flops("
            "m, n, k), math='bf16'), or limit the mark to the measurements that do with name="
        )
    floors = WorkFloors()
    if flops_rule is not None:
        floors = WorkFloors(flops=flops_rule.value, flops_origin=flops_rule.origin)
    if roofline_rule is not None:
        floors = WorkFloors(
            flops=floors.flops,
            flops_origin=floors.flops_origin,
            roofline=roofline_rule.value,
            roofline_origin=roofline_rule.origin,
        )
    return work, floors


def check_setup(setup: Any, label: str) -> None:
    """A `setup=` is something to call before each launch (refused before anything runs)."""
    if setup is not None and not callable(setup):
        raise ConfigError(f"{label}: setup= must be a callable (it runs before each launch)")


def resolve_kernel_path(path: str | Path, *, test_dir: Path | None, rootdir: Path) -> Path:
    """The .hip file a test names: next to the test file, under the rootdir, or shipped with
    the plugin (where a leading 'kernels/' is optional)."""
    relative = Path(path)
    if relative.is_absolute():
        candidates = [relative]
    else:
        candidates = [base / relative for base in (test_dir, rootdir) if base is not None]
        candidates.append(KERNELS_DIR / relative)
        if relative.parts and relative.parts[0] == "kernels" and len(relative.parts) > 1:
            candidates.append(KERNELS_DIR.joinpath(*relative.parts[1:]))
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    tried = ", ".join(str(c) for c in dict.fromkeys(candidates))
    raise ConfigError(f"kernel source {str(path)!r} not found; looked for: {tried}")


def relative_paths(paths: list[Path], rootdir: Path) -> list[str]:
    """`paths` relative to `rootdir` where they lie under it (else absolute), as POSIX text:
    the kernel files a test loaded, as reports name them."""
    root = rootdir.resolve()
    named = []
    for path in paths:
        resolved = path.resolve()
        shown = resolved.relative_to(root) if resolved.is_relative_to(root) else resolved
        named.append(shown.as_posix())
    return named
