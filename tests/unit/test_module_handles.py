"""One module-handle bookkeeping (runtime/base.py) for the CUDA and HIP backends: every module
compile or load_again loads is unloaded exactly once, by unload or by close, whichever comes
first. cuda.py and hip.py run over their real driver modules with only the driver calls
answered (tests/unit/conftest.py), and both backends must leave the same trace, so the two
cannot drift apart again. tests/gpu runs the same on the H100 (CUDA, and HIP over the shim)."""

from __future__ import annotations

import itertools

import pytest

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.runtime.compile import CompileResult

SOURCE = '#include "gpuperf.h"\nGPUPERF_KERNEL void put(float* x) { x[0] = 3.0f; }\n'


class Driver:
    """What the load and unload calls saw, with handles numbered in load order."""

    def __init__(self) -> None:
        self.numbers = itertools.count(1)
        self.loaded: list[int] = []
        self.unloaded: list[int] = []
        self.fail_unload = False

    def load(self, binary: bytes) -> Handle:
        assert binary == b"code object"
        handle = Handle(next(self.numbers))
        self.loaded.append(handle.number)
        return handle

    def unload(self, handle: Handle) -> bool:
        self.unloaded.append(handle.number)
        return not self.fail_unload


class Handle:
    """A driver's module handle: compared by identity, as the backends compare them."""

    def __init__(self, number: int) -> None:
        self.number = number


@pytest.fixture(autouse=True)
def no_compiler(monkeypatch):
    """The compile step answers at once: what is tested is the load that follows it."""
    result = CompileResult(binary=b"code object", log="", compiler_version="stub")
    for backend in ("cuda", "hip"):
        module = pytest.importorskip(f"pytest_gpuperf.runtime.{backend}")
        monkeypatch.setattr(module, "compile_source", lambda request, **_: result)


@pytest.fixture
def cuda_backend(driver, monkeypatch):
    from pytest_gpuperf.runtime import cuda

    ok, failed = driver.CUresult.CUDA_SUCCESS, driver.CUresult.CUDA_ERROR_INVALID_HANDLE
    calls = Driver()
    monkeypatch.setattr(driver, "cuModuleLoadData", lambda binary: (ok, calls.load(binary)))
    monkeypatch.setattr(
        driver, "cuModuleUnload", lambda handle: (ok if calls.unload(handle) else failed,)
    )
    for name in ("cuCtxSynchronize", "cuDevicePrimaryCtxRelease"):
        monkeypatch.setattr(driver, name, lambda *args: (ok,))
    backend = cuda.open(0)
    backend.calls = calls  # type: ignore[attr-defined]
    return backend


@pytest.fixture
def hip_backend(hip_runtime, monkeypatch):
    from pytest_gpuperf.runtime import hip

    ok, failed = hip_runtime.hipError_t.hipSuccess, hip_runtime.hipError_t.hipErrorInvalidHandle
    calls = Driver()
    monkeypatch.setattr(hip_runtime, "hipModuleLoadData", lambda binary: (ok, calls.load(binary)))
    monkeypatch.setattr(
        hip_runtime, "hipModuleUnload", lambda handle: (ok if calls.unload(handle) else failed,)
    )
    monkeypatch.setattr(hip_runtime, "hipDeviceSynchronize", lambda: (ok,))
    backend = hip.open(0)
    backend.calls = calls  # type: ignore[attr-defined]
    return backend


def trace(backend) -> list[tuple[str, list[int], list[int]]]:
    """Compile, load twice more, unload one load twice, then close: after each step, the
    loads and unloads the driver saw."""
    calls = backend.calls
    steps = []

    def step(what: str) -> None:
        steps.append((what, list(calls.loaded), list(calls.unloaded)))

    module = backend.compile(SOURCE, name="put.hip")
    step("compile")
    again = backend.load_again(module)
    third = backend.load_again(again)
    assert len({id(module.handle), id(again.handle), id(third.handle)}) == 3
    step("load_again twice")
    backend.unload(again)
    step("unload")
    backend.unload(again)  # held no more: the driver never sees a handle twice
    step("unload again")
    backend.close()
    step("close")
    backend.unload(third)  # after close: unloaded there already
    step("unload after close")
    return steps


EXPECTED = [
    ("compile", [1], []),
    ("load_again twice", [1, 2, 3], []),
    ("unload", [1, 2, 3], [2]),
    ("unload again", [1, 2, 3], [2]),
    ("close", [1, 2, 3], [2, 1, 3]),
    ("unload after close", [1, 2, 3], [2, 1, 3]),
]


def test_cuda_unloads_every_module_once(cuda_backend):
    assert trace(cuda_backend) == EXPECTED


def test_hip_unloads_every_module_once(hip_backend):
    assert trace(hip_backend) == EXPECTED


@pytest.mark.parametrize("which", ["cuda_backend", "hip_backend"])
def test_a_failed_unload_names_the_call_and_is_not_retried(which, request):
    backend = request.getfixturevalue(which)
    module = backend.compile(SOURCE, name="put.hip")
    again = backend.load_again(module)
    backend.calls.fail_unload = True
    with pytest.raises(GpuPerfError, match=r"(cu|hip)ModuleUnload failed"):
        backend.unload(again)
    backend.calls.fail_unload = False
    backend.close()
    assert backend.calls.unloaded == [2, 1]  # the failed handle is not handed over again


def test_both_backends_keep_no_bookkeeping_of_their_own():
    """The handles live in the base class only: a backend's own list would drift."""
    import inspect

    from pytest_gpuperf.runtime import base

    for backend in ("cuda", "hip"):
        module = pytest.importorskip(f"pytest_gpuperf.runtime.{backend}")
        text = inspect.getsource(module)
        assert "_module_handles" not in text and "self._modules" not in text, backend
        assert "def unload(" not in text, backend
    assert "self._module_handles" in inspect.getsource(base.Backend)
