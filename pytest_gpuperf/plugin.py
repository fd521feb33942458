"""pytest-facing layer (being built): options, markers, the gpu_bench fixture, reports."""
