"""What a gpuperf session reports, one renderer a module; none of them imports pytest or
decides anything (the gate's verdicts are read, never changed):

- terminal.py: the table at the end of a session; explain.py: a failing test's message;
- markdown.py: the job summary / pull-request comment; junit.py: JUnit XML properties;
- json_report.py: our versioned JSON; benchmark_json.py: pytest-benchmark's layout;
- text.py, cells.py, devices.py: the words and cells they share.
"""

from pytest_gpuperf.report.benchmark_json import benchmark_stats, to_pytest_benchmark_json
from pytest_gpuperf.report.explain import failure_text, one_line
from pytest_gpuperf.report.json_report import (
    REPORT_SCHEMA,
    REPORT_SCHEMA_VERSION,
    rows_from_json,
    to_json,
    write_json,
)
from pytest_gpuperf.report.junit import junit_properties
from pytest_gpuperf.report.markdown import append_github_step_summary, markdown
from pytest_gpuperf.report.terminal import terminal_table
from pytest_gpuperf.report.text import (
    SIMULATED_BANNER,
    ReportMeta,
    format_gbps,
    format_time,
    summary_line,
    verdict_label,
)
from pytest_gpuperf.results import Row

__all__ = [
    "REPORT_SCHEMA",
    "REPORT_SCHEMA_VERSION",
    "SIMULATED_BANNER",
    "ReportMeta",
    "Row",
    "append_github_step_summary",
    "benchmark_stats",
    "failure_text",
    "format_gbps",
    "format_time",
    "junit_properties",
    "markdown",
    "one_line",
    "rows_from_json",
    "summary_line",
    "terminal_table",
    "to_json",
    "to_pytest_benchmark_json",
    "verdict_label",
    "write_json",
]
