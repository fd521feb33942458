"""The code facts of a failure: what the compiler made of head and base (registers, spills,
shared memory, occupancy, global loads and stores by width) and what changed between them.

failure.py gathers them for a failing verdict with a base; kernel_facts.py reads one kernel's
from the run's own build (the driver, ptxas -v, nvdisasm's SASS, or clang for a gfx arch);
code_facts.py holds `CodeFacts`; ptxas.py, memory_ops.py and nvidia_occupancy.py read the tools'
outputs; code_diff.py says base against head in a few lines. It never runs a profiler (that is
explain/counters/).
"""
