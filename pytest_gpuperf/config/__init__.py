"""What the user asked for: every option declared once (options.py), one value parsed and
checked (parsing.py, against the closed ranges of ranges.py), and the frozen `Settings` a run
is built from (settings.py). Nothing here imports pytest; the pytest layer (plugin/) reads
the command line and the ini file into these."""
