"""What a gpuperf session reports, one renderer a module; none of them imports pytest or
decides anything (the gate's verdicts are read, never changed):

- terminal.py: the table at the end of a session;
- failure.py: a failing test's message, in the words of stored_words.py (the stored baseline),
  ab_words.py (head against base) and band_words.py (a baseline's noise band);
- markdown_summary.py: the job summary / pull-request comment; junit.py: JUnit XML properties;
- json_document.py: our versioned JSON (its layout and writer are record/json_report.py's);
  benchmark_json.py: pytest-benchmark's layout;
- text.py, cells.py, devices.py: the words and cells they share;
- faults.py: the lines about files not written, saves not made and Ctrl-C.

What a run is (the verdicts, `ReportMeta`, the JSON's schema, where a report may be written)
is `pytest_gpuperf.record`'s; the shards' merge is `gpuperf merge`'s (commands/merge/).

Names load on first use (PEP 562): a session that only checks its report paths must not
import the renderers, and through them the baseline store and its file lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_gpuperf.runtime.lazy import lazy_getattr

_HOMES = {
    "benchmark_stats": "benchmark_json",
    "to_pytest_benchmark_json": "benchmark_json",
    "failure_text": "failure",
    "not_measured_reason": "failure",
    "interrupted_line": "faults",
    "no_model_text": "faults",
    "os_fault_line": "faults",
    "saved_lines": "faults",
    "one_line": "failure",
    "to_json": "json_document",
    "junit_properties": "junit",
    "append_github_step_summary": "markdown_summary",
    "markdown": "markdown_summary",
    "terminal_table": "terminal",
    "SIMULATED_BANNER": "text",
    "format_gbps": "text",
    "format_time": "text",
    "summary_line": "text",
    "verdict_label": "text",
}

if TYPE_CHECKING:
    from pytest_gpuperf.report.benchmark_json import benchmark_stats, to_pytest_benchmark_json
    from pytest_gpuperf.report.failure import failure_text, not_measured_reason, one_line
    from pytest_gpuperf.report.faults import (
        interrupted_line,
        no_model_text,
        os_fault_line,
        saved_lines,
    )
    from pytest_gpuperf.report.json_document import to_json
    from pytest_gpuperf.report.junit import junit_properties
    from pytest_gpuperf.report.markdown_summary import append_github_step_summary, markdown
    from pytest_gpuperf.report.terminal import terminal_table
    from pytest_gpuperf.report.text import (
        SIMULATED_BANNER,
        format_gbps,
        format_time,
        summary_line,
        verdict_label,
    )


__getattr__ = lazy_getattr(__name__, _HOMES)


__all__ = [
    "SIMULATED_BANNER",
    "append_github_step_summary",
    "benchmark_stats",
    "failure_text",
    "format_gbps",
    "format_time",
    "interrupted_line",
    "junit_properties",
    "markdown",
    "no_model_text",
    "not_measured_reason",
    "one_line",
    "os_fault_line",
    "saved_lines",
    "summary_line",
    "terminal_table",
    "to_json",
    "to_pytest_benchmark_json",
    "verdict_label",
]
