"""`gpuperf publish`: a one-file HTML dashboard of the baseline files and the JSON reports (a
summary grid, a plot per measurement with the gate's band, the regressions, a bisection's
result), made to open from the file system (docs/ci.md, "A dashboard of the nightly runs")."""
