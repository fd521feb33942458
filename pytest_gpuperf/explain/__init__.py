"""Why a measurement is what it is: what changed in the code between base and head, and what
the vendor's profiler counted for one launch of each (the verdict never depends on it)."""
