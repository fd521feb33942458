"""The commands a user runs outside pytest, under one console script, `gpuperf` (gpuperf.py):
compare, history, publish, merge and bisect, each a thin entry over the layers whose files it
reads (record/'s reports, baseline/'s files, gate/'s band); bisect runs pytest as a child
process and never imports it. old_paths/ keeps their `python -m pytest_gpuperf.<command>`
paths for one release."""
