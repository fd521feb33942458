"""`gpuperf merge`: the shards of a perf suite run over N CI runners made into one report with
one verdict (shards.py), and their saved baselines into one baseline folder
(baseline/merge.py); the command itself is __main__.py (docs/ci.md, "One suite over N GPU
runners")."""
