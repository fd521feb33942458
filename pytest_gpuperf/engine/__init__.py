"""The measurement engine: one kernel (or an A/B pair, or a callable) timed on the device
until the median's interval is tight (measure.py, sampling.py, pairing.py, recording.py,
timing.py), its statistics (stats.py, student_t.py), the clocks around it (clocks.py), and the
values that flow from here to the gate and the reports (results.py, plain.py). It knows neither
pytest nor the gate: the rules it samples by are policy.py's."""
