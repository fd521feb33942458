"""explain/code/cupy_facts.py on objects shaped as CuPy keeps them (no CuPy needed): a
RawKernel's driver-attribute properties and a RawModule's `get_function`, with the names of
CuPy 13.6 and 14.2 (cupy/_core/raw.pyx, raw.pxd), and CuPy's memo of compiled modules
(`cupy._core.raw._get_raw_module`, memoized per device with its nine arguments as the key)
that decides which kernels may be read at all: reading a property of a kernel never compiled
compiles it."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_gpuperf.explain.code.cupy_facts import (
    CupyKernelFacts,
    compiled_sources,
    cupy_changes,
    cupy_facts,
)
from pytest_gpuperf.explain.code.failure import _callable_explanation
from pytest_gpuperf.session.callable_base import BaseCallable

SOURCE = 'extern "C" __global__ void scale_kernel(float* x) { x[threadIdx.x] *= 2.0f; }'


@dataclass
class RawKernel:
    """cupy.RawKernel (13.x/14.x): `code`, `name`, `options`, `backend`, `file_path`,
    `enable_cooperative_groups` readable; `num_regs`, `local_size_bytes`,
    `shared_size_bytes`, `max_threads_per_block` properties calling cuFuncGetAttribute on
    the compiled kernel (compiling it first, so a read is recorded here), -1 for an attribute
    the CUDA lacks; `attributes` the dict of them all."""

    name: str
    code: str | None = SOURCE
    options: tuple[str, ...] = ()
    backend: str = "nvrtc"
    file_path: str | None = None
    enable_cooperative_groups: bool = False
    driver: dict[str, Any] = field(default_factory=dict)  # attribute -> value, or raised
    reads: list[str] = field(default_factory=list)

    def _get(self, attribute: str) -> Any:
        self.reads.append(attribute)
        value = self.driver.get(attribute, 0)
        if isinstance(value, BaseException):
            raise value
        return value

    @property
    def num_regs(self) -> Any:
        return self._get("num_regs")

    @property
    def local_size_bytes(self) -> Any:
        return self._get("local_size_bytes")

    @property
    def shared_size_bytes(self) -> Any:
        return self._get("shared_size_bytes")

    @property
    def max_threads_per_block(self) -> Any:
        return self._get("max_threads_per_block")

    @property
    def attributes(self) -> dict[str, Any]:
        return {k: self._get(k) for k in ("num_regs", "local_size_bytes")}


@dataclass
class RawModule:
    """cupy.RawModule: `code`, `file_path`, `options`, `backend`, `name_expressions`
    readable; `get_function(name)` a RawKernel of the module (raises for a name it lacks)."""

    code: str | None
    name_expressions: tuple[str, ...] | None = None
    options: tuple[str, ...] = ()
    backend: str = "nvrtc"
    file_path: str | None = None
    enable_cooperative_groups: bool = False
    kernels: dict[str, RawKernel] = field(default_factory=dict)

    def get_function(self, name: str) -> RawKernel:
        return self.kernels[name]

    def get_global(self, name: str) -> int:
        return 0


def memo_key(source: str | None, device: int = 0, log_stream: object = None) -> tuple:
    """The key cupy._util.memoize(for_each_device=True) files _get_raw_module's result under:
    (device, (code, path, options, backend, translate_cucomplex, enable_cooperative_groups,
    jitify, name_expressions, log_stream))."""
    return (device, (source, None, (), "nvrtc", False, False, False, None, log_stream))


@pytest.fixture
def cupy_memo(monkeypatch):
    """CuPy as imported, on device 0: its memo of compiled modules (a dict to fill)."""
    memo: dict[tuple, object] = {}

    def memoize(f):
        def ret(*args):
            return memo.setdefault((0, args), f(*args))

        return ret

    raw = types.ModuleType("cupy._core.raw")
    raw._get_raw_module = memoize(lambda *args: "a Module")  # type: ignore[attr-defined]
    runtime = types.ModuleType("cupy_backends.cuda.api.runtime")
    runtime.getDevice = lambda: 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy._core.raw", raw)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.api.runtime", runtime)
    return memo


def module(**values: object) -> types.ModuleType:
    made = types.ModuleType("kernels")
    vars(made).update(values)
    return made


def compiled(memo: dict, *kernels: RawKernel | RawModule) -> None:
    for kernel in kernels:
        memo[memo_key(kernel.code)] = "a Module"


def test_the_words_head_against_base(cupy_memo):
    old = RawKernel("scale_kernel", driver={"num_regs": 16, "max_threads_per_block": 1024})
    new = RawKernel(
        "scale_kernel",
        code=SOURCE.replace("2.0f", "3.0f"),
        driver={"num_regs": 24, "local_size_bytes": 64, "max_threads_per_block": 1024},
    )
    compiled(cupy_memo, old, new)
    lines = cupy_changes(cupy_facts([module(k=new)]), cupy_facts([module(k=old)]))
    assert lines == [
        "cupy scale_kernel: registers 16 -> 24, local memory 0 -> 64 bytes (spills), "
        "shared memory 0 -> 0 bytes, max threads per block 1024 -> 1024"
    ]


def test_spills_are_named_only_where_heads_local_memory_rose():
    base = CupyKernelFacts("k", registers=40, local_bytes=64, shared_bytes=0)
    head = CupyKernelFacts("k", registers=32, local_bytes=32, shared_bytes=0)
    assert cupy_changes({"k": head}, {"k": base}) == [
        "cupy k: registers 40 -> 32, local memory 64 -> 32 bytes, shared memory 0 -> 0 bytes, "
        "max threads per block ? -> ?"
    ]


def test_a_kernel_on_one_side_only(cupy_memo):
    only = RawKernel("new_kernel", code=SOURCE.replace("scale", "new"))
    compiled(cupy_memo, only)
    head = cupy_facts([module(k=only)])
    assert cupy_changes(head, {}) == ["cupy new_kernel: compiled on the head side only"]
    assert cupy_changes({}, head) == ["cupy new_kernel: compiled on the base side only"]


def test_an_attribute_that_raises_or_is_minus_one_is_a_question_mark(cupy_memo):
    kernel = RawKernel(
        "scale_kernel",
        driver={
            "num_regs": 18,
            "local_size_bytes": RuntimeError("CUDA_ERROR_INVALID_CONTEXT"),
            "shared_size_bytes": -1,  # CuPy's value for an attribute the CUDA lacks
            "max_threads_per_block": 1024,
        },
    )
    compiled(cupy_memo, kernel)
    facts = cupy_facts([module(k=kernel)])
    assert facts == {"scale_kernel": CupyKernelFacts("scale_kernel", 18, None, None, 1024)}
    assert cupy_changes(facts, facts) == [
        "cupy scale_kernel: registers 18 -> 18, local memory ? -> ? bytes, "
        "shared memory ? -> ? bytes, max threads per block 1024 -> 1024"
    ]


def test_a_kernel_never_compiled_is_not_read(cupy_memo):
    """Reading would compile it (NVRTC, on the GPU): a kernel the callable never launched,
    one compiled on another device, or under a log stream (another memo key), is left alone."""
    unlaunched = RawKernel("unlaunched", code=SOURCE.replace("scale", "unlaunched"))
    elsewhere = RawKernel("elsewhere", code=SOURCE.replace("scale", "elsewhere"))
    logged = RawKernel("logged", code=SOURCE.replace("scale", "logged"))
    cupy_memo[memo_key(elsewhere.code, device=1)] = "a Module"
    cupy_memo[memo_key(logged.code, log_stream=sys.stdout)] = "a Module"
    assert cupy_facts([module(a=unlaunched, b=elsewhere, c=logged)]) == {}
    assert unlaunched.reads == elsewhere.reads == logged.reads == []


def test_nothing_is_read_without_cupy_imported_or_a_device(monkeypatch, cupy_memo):
    kernel = RawKernel("scale_kernel")
    compiled(cupy_memo, kernel)

    def no_device() -> int:
        raise RuntimeError("cudaErrorInsufficientDriver")

    monkeypatch.setattr(sys.modules["cupy_backends.cuda.api.runtime"], "getDevice", no_device)
    assert compiled_sources() is None
    assert cupy_facts([module(k=kernel)]) == {}
    monkeypatch.delitem(sys.modules, "cupy._core.raw")
    assert compiled_sources() is None
    assert cupy_facts([module(k=kernel)]) == {} and kernel.reads == []


def test_the_memo_is_found_through_the_memoizing_closure(cupy_memo):
    """The memo is reached from `_get_raw_module` itself; a real call files the source."""
    assert compiled_sources() == frozenset()
    sys.modules["cupy._core.raw"]._get_raw_module(
        SOURCE, None, ("-O3",), "nvrtc", False, True, False, None, None
    )
    assert compiled_sources() == frozenset({(SOURCE, None, ("-O3",), "nvrtc", True)})


def test_a_raw_modules_kernels_by_name_expression_or_by_source(cupy_memo):
    code = (
        'extern "C" __global__ void first(float* x) {}\n'
        'extern "C" __global__ __launch_bounds__(256) void second(float* x) {}\n'
        "__global__ void mangled(float* x) {}\n"
    )
    kernels = {
        "first": RawKernel("first", code=code, driver={"num_regs": 8}),
        "second": RawKernel("second", code=code, driver={"num_regs": 12}),
    }
    by_source = RawModule(code=code, kernels=kernels)  # `mangled` is not exported so
    compiled(cupy_memo, by_source)
    facts = cupy_facts([module(mod=by_source)])
    assert {name: f.registers for name, f in facts.items()} == {"first": 8, "second": 12}
    template = "template<typename T> __global__ void fill(T* x) {}"
    by_expression = RawModule(
        code=template,
        name_expressions=("fill<float>",),
        kernels={"fill<float>": RawKernel("_Z4fillIfEvPT_", code=template, driver={"num_regs": 6})},
    )
    compiled(cupy_memo, by_expression)
    assert cupy_facts([module(mod=by_expression)])["fill<float>"].registers == 6


def test_other_globals_are_passed_over(cupy_memo):
    class Lazy:
        def __getattr__(self, name: str) -> Any:
            raise ImportError("a lazy import proxy")

    kernel = RawKernel("scale_kernel", driver={"num_regs": 10})
    compiled(cupy_memo, kernel)
    found = cupy_facts([module(lazy=Lazy(), cls=RawKernel, number=3, k=kernel)])
    assert list(found) == ["scale_kernel"]


class Bench:
    """What failure._callable_explanation asks of the fixture."""

    def __init__(self, base: BaseCallable) -> None:
        self.base = base

    def callable_launches(self, name: str) -> str:
        return ""

    def callable_base_of(self, name: str) -> BaseCallable:
        return self.base


def test_a_callables_failure_lists_its_cupy_kernels(cupy_memo):
    old = RawKernel("scale_kernel", driver={"num_regs": 16})
    new = RawKernel("scale_kernel", code=SOURCE + " ", driver={"num_regs": 32})
    compiled(cupy_memo, old, new)
    base = BaseCallable(head_modules=(module(k=new),), base_modules=(module(k=old),))
    code = _callable_explanation(Bench(base), "scale", ["kernels.py"])  # type: ignore[arg-type]
    assert code["changes"] == [
        "cupy scale_kernel: registers 16 -> 32, local memory 0 -> 0 bytes, "
        "shared memory 0 -> 0 bytes, max threads per block 0 -> 0"
    ]
