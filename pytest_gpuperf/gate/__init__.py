"""The gate: the one place that decides what a measurement means for its test.

- policy.py: the defaults and rules (priors of the run-to-run spread, thresholds, history).
- floor.py, stored.py, ab.py: the three checks (min_bw floor, stored baseline, A/B in one run).
- saving.py: what --gpuperf-save records (a history per entry; the spread it learns).
- decide.py: composes them into a `verdict.Verdict`; judge.py gathers a test's inputs.

Only this package builds `Verdict`s and their checks; renderers (report/) read them. Importing
the package itself is free: each module is imported where it is used.
"""
