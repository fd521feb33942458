"""One check of the device data path for any backend (the simulated device in tests/unit,
the GPU in tests/gpu): a catalog case's inputs made by the hash kernel agree bit for bit with
NumPy's, the kernel's outputs pass the compare kernel, the float64 references computed on the
device agree with NumPy's, and a wrong element is found with its index."""

from __future__ import annotations

import numpy as np

from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.session.catalog import KERNELS, KernelCase, check_on_device, device_args
from pytest_gpuperf.simulate.input_hash import Values


def check_case_on(backend, name: str, size: int) -> None:
    entry = KERNELS[name]
    case = entry.make_case(size, np.random.default_rng(size))
    module = backend.compile(KERNELS_DIR / entry.file)
    first = _launch_and_check(backend, module, name, case, ())
    for follow in case.follow_ups:
        _launch_and_check(backend, module, follow.name, follow.case, first)
    for buffer in first:
        if hasattr(buffer, "free") and not buffer.freed:
            buffer.free()


def _launch_and_check(backend, module, name: str, case: KernelCase, first: tuple) -> tuple:
    args = device_args(backend, case.layout, first)
    for item, buffer in zip(case.layout, args, strict=True):
        if isinstance(item, Values):  # the device's hash is NumPy's, bit for bit
            made = np.empty(item.count, np.float32)
            backend.synchronize()
            backend.download(made, buffer)
            assert made.tobytes() == item.host().tobytes(), f"{name}: inputs differ from NumPy's"
    backend.launch(module.kernel(name), case.grid, case.block, args)
    backend.synchronize()
    for index, (found, reference) in check_on_device(backend, case, args, keep=True).items():
        try:
            assert (found.wrong, found.first_index) == (0, None), f"{name} output {index}"
            on_device = np.empty(case.count(index), np.float64)
            backend.download(on_device, reference)
        finally:
            reference.free()
        np.testing.assert_allclose(
            on_device, case.expected[index], rtol=max(case.rtol, 1e-12), atol=case.atol,
            err_msg=f"{name}: the device's float64 reference differs from NumPy's",
        )  # fmt: skip
        _check_finds_wrong_elements(backend, case, index, args)
    return args


def _check_finds_wrong_elements(backend, case: KernelCase, index: int, args: tuple) -> None:
    """Spoil two elements of the output (a wrong value, then a NaN): the compare kernel counts
    both and names the first."""
    count = case.count(index)
    got = np.empty(count, np.float32)
    backend.download(got, args[index])
    saved = got.copy()
    bad = [count // 3, count - 1] if count > 1 else [0]
    got[bad[0]] = got[bad[0]] * 2 + 1
    got[bad[-1]] = np.nan
    backend.upload(args[index], got)
    try:
        found = check_on_device(backend, case, args)[index]
        assert (found.wrong, found.first_index) == (len(set(bad)), bad[0])
    finally:
        backend.upload(args[index], saved)
