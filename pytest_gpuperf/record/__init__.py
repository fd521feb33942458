"""What a run is, once: the layer between the gate that decides and everything that reads
what it decided.

- verdict.py: the verdict of one measurement (status, checks, save, notes) and its `Row`;
- checks.py: the checks as data (floor, stored baseline with its noise band and drift, A/B);
- meta.py: what a report says about the run itself (`ReportMeta`);
- json_report.py: the JSON report's layout and schema version, its rows read back, its writer;
- report_reader.py, report_checks.py: the JSON report's one reader (bounded, finite numbers,
  types, schema version, duplicates refused), which merge, compare, publish, history and
  bisect all use; shard_reader.py: the shards' reports read for merge;
- json_text.py: the bounded, strict JSON every offline command and child-process line is
  parsed with (the only `json.loads` of the package);
- history_model.py: the one model of a stored entry's history (its points and level);
- files.py: where a report file may be written, and the one writer every report goes through.

It sits below the gate (which builds verdicts) and above the baselines and the engine (whose
entries and measurements a verdict carries): renderers (report/), the plugin and the offline
commands read it; nothing here measures, decides or words anything. Importing the package
itself is free: each module is imported where it is used.
"""
