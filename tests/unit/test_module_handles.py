"""One module-handle bookkeeping (runtime/base.py) for the CUDA and HIP backends: every module
compile or load_again loads is unloaded exactly once, by unload or by close, whichever comes
first. cuda.py and hip.py run over their real driver modules with only the driver calls
answered (tests/unit/conftest.py), and both backends must leave the same trace, so the two
cannot drift apart again. tests/gpu runs the same on the H100 (CUDA, and HIP over the shim)."""

from __future__ import annotations

import importlib
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
    """The compile step answers at once: what is tested is the load that follows it (both
    backends compile through Backend._build in runtime/base.py)."""
    result = CompileResult(binary=b"code object", log="", compiler_version="stub")
    module = importlib.import_module("pytest_gpuperf.runtime.base")
    monkeypatch.setattr(module, "compile_source", lambda request, **_: result)


# Per backend: the fixture of its driver module (conftest.py), its success and bad-handle
# codes, its load and unload calls, and the calls its close makes besides.
STUBS = {
    "cuda": (
        "driver",
        lambda d: (d.CUresult.CUDA_SUCCESS, d.CUresult.CUDA_ERROR_INVALID_HANDLE),
        ("cuModuleLoadData", "cuModuleUnload", "cuCtxSynchronize", "cuDevicePrimaryCtxRelease"),
    ),
    "hip": (
        "hip_runtime",
        lambda h: (h.hipError_t.hipSuccess, h.hipError_t.hipErrorInvalidHandle),
        ("hipModuleLoadData", "hipModuleUnload", "hipDeviceSynchronize"),
    ),
}


@pytest.fixture(params=sorted(STUBS))
def backend(request, monkeypatch):
    """The backend opened over its driver module, the module calls answered by a Driver
    that records them (an unload fails while it is told to)."""
    fixture, codes, (load, unload, *others) = STUBS[request.param]
    runtime = request.getfixturevalue(fixture)
    ok, failed = codes(runtime)
    calls = Driver()
    monkeypatch.setattr(runtime, load, lambda binary: (ok, calls.load(binary)))
    monkeypatch.setattr(runtime, unload, lambda handle: (ok if calls.unload(handle) else failed,))
    for name in others:
        monkeypatch.setattr(runtime, name, lambda *args: (ok,))
    opened = importlib.import_module(f"pytest_gpuperf.runtime.{request.param}").open(0)
    opened.calls = calls
    return opened


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


def test_each_backend_unloads_every_module_once(backend):
    """Both backends are held to one trace: neither can drift from the base's bookkeeping."""
    assert trace(backend) == EXPECTED


def test_a_failed_unload_names_the_call_and_is_not_retried(backend):
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
