"""explain/code/triton_facts.py on objects shaped as Triton keeps them (no Triton needed): a
`@triton.jit` function's per-device cache of compiled kernels, an autotuner wrapping one."""

from __future__ import annotations

import types
from collections import namedtuple

from pytest_gpuperf.explain.code.triton_facts import triton_changes, triton_facts

Metadata = namedtuple("Metadata", "name shared")


class Compiled:
    def __init__(self, registers: int, spills: int, shared: int) -> None:
        self.n_regs, self.n_spills = registers, spills
        self.metadata = Metadata("copy_kernel", shared)


class JitFunction:
    """Triton 3.x: device -> (kernel cache, target, backend, binder)."""

    def __init__(self, name: str, *compiled: Compiled) -> None:
        self.fn = types.FunctionType((lambda: None).__code__, {}, name)
        self.device_caches = {0: ({f"key{i}": c for i, c in enumerate(compiled)}, None, None)}


class OldJitFunction:
    """Before Triton 3.2: device -> {key: compiled}."""

    def __init__(self, name: str, compiled: Compiled) -> None:
        self.fn = types.FunctionType((lambda: None).__code__, {}, name)
        self.cache = {0: {"key": compiled}}


class Autotuner:
    def __init__(self, fn: object) -> None:
        self.fn = fn
        self.cache = {("n",): "a config"}


def module(**values: object) -> types.ModuleType:
    made = types.ModuleType("mykern")
    vars(made).update(values)
    return made


def test_head_against_base_names_registers_spills_and_shared_memory():
    head = module(copy_kernel=JitFunction("copy_kernel", Compiled(16, 0, 0), Compiled(18, 2, 0)))
    base = module(copy_kernel=JitFunction("copy_kernel", Compiled(16, 0, 0)))
    (line,) = triton_changes(triton_facts([head]), triton_facts([base]))
    assert (
        line == "triton copy_kernel: registers 16 -> 18, spills 0 -> 2, shared memory 0 -> 0 bytes"
    )


def test_an_autotuned_and_an_older_triton_function_are_found():
    head = module(tuned=Autotuner(JitFunction("tuned", Compiled(32, 0, 4096))))
    base = module(tuned=Autotuner(OldJitFunction("tuned", Compiled(32, 0, 8192))))
    (line,) = triton_changes(triton_facts([head]), triton_facts([base]))
    assert (
        line == "triton tuned: registers 32 -> 32, spills 0 -> 0, shared memory 8192 -> 4096 bytes"
    )


def test_a_function_that_never_compiled_and_plain_globals_are_left_out():
    never = JitFunction("never")
    head = module(never=never, number=3, text="x", fn=None)
    assert triton_facts([head]) == {}
    base = module(copy_kernel=JitFunction("copy_kernel", Compiled(16, 0, 0)))
    assert triton_changes({}, triton_facts([base])) == [
        "triton copy_kernel: compiled on the base side only"
    ]
