"""The static gate: what a pull request did to a kernel's gfx942 code, without a GPU.

A large class of performance regressions is visible in the compiler's output alone: VGPRs
that double halve occupancy, a new scratch spill, LDS growth, the L2-bypass bits `sc0 sc1`
gone from a kernel. This package compiles a kernel with a stock clang (no ROCm, no GPU),
reads its resources and occupancy, fingerprints its machine code, and compares two such
readings under fixed rules. It knows nothing of pytest; the plugin wires it in as
`pytest --gpuperf-static=gfx942`.

    build = compile_static("kernels/vector_add.hip", "gfx942", defines={"N": 4})
    facts = kernel_facts(build, "vector_add", block_threads=256)
    result = compare_facts(StaticFacts.from_dict(stored), facts)
    if result.failed:
        print(render_failure(result))
    missing = check_isa(build.asm, "vector_add_bypass", expect=["sc0 sc1"])
"""

from pytest_gpuperf.gate.static.asm import check_isa, kernel_asm, kernel_names
from pytest_gpuperf.gate.static.build import HIP_RUNTIMES, StaticBuild, compile_static
from pytest_gpuperf.gate.static.clang import Clang, find_clang
from pytest_gpuperf.gate.static.compare import (
    DEFAULT_MARGINS,
    StaticChange,
    StaticComparison,
    StaticMargins,
    StaticStatus,
    compare_facts,
)
from pytest_gpuperf.gate.static.errors import StaticFactsError, StaticUnavailable, UnknownArch
from pytest_gpuperf.gate.static.facts import StaticFacts, kernel_facts, with_occupancy
from pytest_gpuperf.gate.static.render import render_failure, render_markdown, render_missing_isa

__all__ = [
    "DEFAULT_MARGINS",
    "HIP_RUNTIMES",
    "Clang",
    "StaticBuild",
    "StaticChange",
    "StaticComparison",
    "StaticFacts",
    "StaticFactsError",
    "StaticMargins",
    "StaticStatus",
    "StaticUnavailable",
    "UnknownArch",
    "check_isa",
    "compare_facts",
    "compile_static",
    "find_clang",
    "kernel_asm",
    "kernel_facts",
    "kernel_names",
    "render_failure",
    "render_markdown",
    "render_missing_isa",
    "with_occupancy",
]
