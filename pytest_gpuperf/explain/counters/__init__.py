"""The profiler pass of a failure: what the vendor's profiler counted for head and base
(docs/explain-traffic.md).

profile.py re-runs the test in a child process under ncu or rocprofv3 (ncu.py, rocprof.py read
their reports), traffic.py holds one launch's counters and says head against base,
bytes_check.py holds the declared bytes against the counters, measured.py gives both as plain
data for the verdict's `explain`. It never reads the compiled code (that is explain/code/).
"""
