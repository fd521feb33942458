"""Find the commit that made a kernel slower: `gpuperf bisect GOOD BAD [-- PYTEST_ARGS]`.

Each probe runs the user's perf tests through the plugin with one commit's kernels as head
and GOOD's as base, measured interleaved in one process as `--gpuperf-compare` does; the
search is a binary search over the first-parent commits that changed a kernel file the
tests load (docs/ci.md, "A nightly run regressed: find the commit").
"""

from pytest_gpuperf.commands.bisect.commits import Commit, RangeError
from pytest_gpuperf.commands.bisect.probe import Key, ProbeError, ProbeFailed, ProbeRun, Reading
from pytest_gpuperf.commands.bisect.runner import Bisection, Plan, Report, SearchStopped
from pytest_gpuperf.commands.bisect.search import Outcome, Probe, Search, Step

__all__ = [
    "Bisection",
    "Commit",
    "Key",
    "Outcome",
    "Plan",
    "Probe",
    "ProbeError",
    "ProbeFailed",
    "ProbeRun",
    "RangeError",
    "Reading",
    "Report",
    "Search",
    "SearchStopped",
    "Step",
]
