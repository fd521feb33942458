#!/bin/bash
# The explain pass's measurements on the GPU machine (docs/benchmarks.md, "Explain pass"):
# (a) a raw Nsight Compute CSV of the perf suite's STREAM copy, recorded through the same
#     command line the explain pass runs (tests/unit/data/ keeps it as the parser's fixture);
# (b) bench/explain_demo.py: a user's repository whose head reads 1.5% and 3% more;
# (c) --gpuperf-check-bytes over the perf suite (tests/perf).
# Usage, from the repository root with $OUT set: bash bench/explain_on_gpu.sh
set -u
NCU=${GPUPERF_NCU:-/usr/local/cuda/bin/ncu}
{ date -u; nvidia-smi -L; "$NCU" --version; } > "$OUT/device.txt" 2>&1
"$NCU" --query-metrics > /tmp/metrics.txt 2>&1
for metric in $(python3 -c "from pytest_gpuperf.explain.ncu import METRICS; print(' '.join(METRICS))"); do
  grep -q "^${metric%%.*} " /tmp/metrics.txt && echo "metric $metric: present" || echo "metric $metric: MISSING"
done >> "$OUT/device.txt"
if grep -q "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum: MISSING" "$OUT/device.txt"; then
  # this ncu names local traffic in sectors only: count those for this run (32 B a sector)
  sed -i 's/l1tex__t_bytes_pipe_lsu_mem_local_op_/l1tex__t_sectors_pipe_lsu_mem_local_op_/' \
    pytest_gpuperf/explain/ncu.py && echo "local-memory metrics: sectors" >> "$OUT/device.txt"
fi
COPY="tests/perf/test_stream.py::test_stream[copy-8M]"
NCU_ARGS=$(python3 -c "
from pathlib import Path
from pytest_gpuperf.explain.ncu import ncu_command
print(' '.join(ncu_command(Path('$NCU'), cache_control='all', log_file=Path('$OUT/ncu_raw.csv'))[1:]))")
start=$(date +%s.%N)
GPUPERF_PROFILE_PLAN="$OUT/plan.jsonl" timeout 90 "$NCU" $NCU_ARGS python3 -m pytest \
  -p pytest_gpuperf.plugin -p no:cacheprovider -q --gpuperf --gpuperf-backend=cuda "$COPY" \
  > /tmp/record.txt 2>&1
echo "recording: exit $?, $(python3 -c "import time; print(round(time.time() - $start, 2))") s" >> "$OUT/device.txt"
tail -5 /tmp/record.txt >> "$OUT/device.txt"
timeout 170 python3 bench/explain_demo.py --backend cuda --out /tmp/demo > /dev/null 2>&1
echo "demo: exit $?" >> "$OUT/device.txt"
cp /tmp/demo/pytest.txt "$OUT/demo_pytest.txt"; cp /tmp/demo/report.json "$OUT/demo_report.json"
cp /tmp/demo/explain.json "$OUT/demo_explain.json"
timeout 200 python3 -m pytest -p pytest_gpuperf.plugin -p no:cacheprovider tests/perf \
  --gpuperf --gpuperf-backend=cuda --gpuperf-check-bytes --gpuperf-budget=0.2 \
  --gpuperf-json="$OUT/perf_report.json" -q -rA > "$OUT/perf_pytest.txt" 2>&1
echo "perf: exit $?" >> "$OUT/device.txt"
