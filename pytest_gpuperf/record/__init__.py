"""What a run is, once: the JSON report's one reader (record/report_reader.py), the bounded
JSON every offline command and child-process line is parsed with (record/json_text.py), and
the one model of a stored entry's history (record/history_model.py)."""
