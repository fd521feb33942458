"""Which kernel files does the benchmark write? vector_add_more reading a chosen number of
extra bytes per mille (EXTRA_PERMILLE) with a code-object salt (GQ_SALT), and the simulated
device's stand-in for the same."""

from __future__ import annotations

from _common import KERNELS_DIR

KERNEL = "vector_add_more"
BLOCK = 256
MAX_PERMILLE = 333  # vector_add_more reads at most one extra float per element
# The simulated device runs no kernel code; a kernel file's `gpuperf-sim: efficiency=`
# directive stands in for its extra bytes: SIM_EFFICIENCY / (1 + EXTRA_PERMILLE / 1000),
# where SIM_EFFICIENCY is the reference 71.85% for vector add on MI300X.
SIM_EFFICIENCY = 0.7185
BEGIN, END = "// gate-quality kernel: begin", "// gate-quality kernel: end"


def kernel_block() -> str:
    """vector_add_more and its comments, as kernels/bench_variants.hip holds it."""
    text = (KERNELS_DIR / "bench_variants.hip").read_text()
    return text[text.index(BEGIN) : text.index(END) + len(END)] + "\n"


def sim_efficiency(permille: int) -> float:
    """The simulated device's stand-in for reading `permille` per mille more bytes."""
    return round(SIM_EFFICIENCY / (1.0 + permille / 1000.0), 6)


def kernel_source(permille: int = 0, salt: int = 1) -> str:
    """A kernel file: vector_add_more reading `permille` per mille more bytes than it declares,
    with code-object salt `salt`, and the simulated device's directive for the same."""
    if not 0 <= permille <= MAX_PERMILLE:
        raise ValueError(f"EXTRA_PERMILLE must be in [0, {MAX_PERMILLE}], not {permille}")
    declaration = f"GPUPERF_KERNEL void {KERNEL}("
    directive = f"// gpuperf-sim: efficiency={sim_efficiency(permille)}\n"
    block = kernel_block().replace(declaration, directive + declaration, 1)
    return (
        '#include "gpuperf.h"\n'
        f"#define EXTRA_PERMILLE {permille}\n"
        f"#define GQ_SALT {salt}\n\n" + block
    )


def extra_floats(elements: int, permille: int) -> int:
    """The floats of `extra` vector_add_more reads (its own integer arithmetic)."""
    return 3 * elements * permille // 1000
