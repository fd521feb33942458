"""One process's view of the device: the `gpu_bench` fixture's `GpuBench` (fixture.py), the
`BenchSession` behind it (bench_session.py: the device opened lazily, compiled modules, the
base revision's tree), which device opens (device.py), the GPU lock across processes, the
shard of the suite this runner takes, the shipped kernels' problems (catalog.py), and the
same measurement without pytest (api.py, the library's front door)."""
