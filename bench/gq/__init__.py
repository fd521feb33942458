"""The parts of bench/gate_quality.py (the command), one question per module.

points, kernels: what is measured and the kernel files; plan, calibrate: the extra bytes each
slower head reads; project, processes, records: the throwaway git project, its separate pytest
processes and what each measured; ab, history: the A/B and stored-baseline scores; library:
the same decisions on fresh simulated devices; render, merge, docs: the tables, a document
from several parts, and their place in docs/benchmarks.md.
"""
