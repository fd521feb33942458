"""Why a regression happened: what the compiled code of head and base says (code facts), what
changed between them, for every failure that has a base (A/B, stored baseline, bisect), and
what the vendor's profiler counted for one launch of each (the verdict never depends on it).

Two families that never import each other: code/ (the code facts of head and base, and what
changed) and counters/ (the profiler pass: one launch of each side counted by ncu or
rocprofv3). Both start from `needs_explaining` here.

Nothing here runs for a passing test: the plugin imports this package only to explain a
failure. Facts come from the build the run already made (the driver's function attributes
where a GPU ran it) and from the compiler's own reports, never from a timing.
"""

from __future__ import annotations

from pytest_gpuperf.record.verdict import FAIL, Verdict

# The failed checks an explanation has a base for: an A/B regression, a stored regression.
EXPLAINED_CAUSES = ("ab", "regression")


def needs_explaining(verdict: Verdict) -> bool:
    """A failure with a base to explain it against: the only verdicts that pay for one."""
    return verdict.status == FAIL and any(c in verdict.failed_checks for c in EXPLAINED_CAUSES)
