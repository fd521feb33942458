"""The roofline in every renderer and reader: the table's TFLOP/s and roof columns (absent from
a memory-bound run), the failure text of a roofline floor, JUnit, the pytest-benchmark
export, the JSON report (schema 4, version 3 still read), the dashboard's plot; the explain
pass's compute counters (ncu, rocprofv3) and the declared FLOPs' check; the simulated
device's compute roof."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import pytest_gpuperf  # noqa: F401 (registers the simulated device, "sim")
from pytest_gpuperf import report
from pytest_gpuperf.commands.publish import roofline as published
from pytest_gpuperf.engine.roofline import Work
from pytest_gpuperf.explain.counters import ncu, rocprof
from pytest_gpuperf.explain.counters.flops_check import FlopsCheck
from pytest_gpuperf.explain.counters.profile import summed
from pytest_gpuperf.explain.counters.traffic import Traffic, compute_lines, traffic_lines
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.gate.roofline import check_flops_floor
from pytest_gpuperf.record import json_report
from pytest_gpuperf.record.checks import NO_BASELINE, BaselineCheck
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.report_reader import read_report
from pytest_gpuperf.record.verdict import Row
from pytest_gpuperf.report.cells import cells
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.simulate import kernel_models
from pytest_gpuperf.simulate.source import SourceText, code_object
from tests import records

GEMM = 2 * 8192**3
WORK = Work(GEMM, "bf16", 1307.4e12)
GEMM_ID = "tests/perf/test_gemm.py::test_gemm"


def gemm(efficiency: float = 0.75, **changes) -> Row:
    """A bf16 8192^3 GEMM on the MI300X at `efficiency` of its compute roof, with a
    min_flops floor of 0.6."""
    time_s = GEMM / (efficiency * 1307.4e12)
    m = records.measurement(
        time_s=time_s,
        bytes_moved=3 * 2 * 8192**2,
        rel_ci=0.002,
        work=WORK,
        name="gemm",
        kernel="gemm",
    )
    m = dataclasses.replace(m, **changes) if changes else m
    verdict = decide(
        baseline=BaselineCheck(outcome=NO_BASELINE), flops_floor=check_flops_floor(m, 0.6)
    )
    return Row(GEMM_ID, m, verdict, "passed" if verdict.status != "fail" else "failed")


def memory_bound() -> Row:
    m = records.measurement(0.8, time_s=1e-4, rel_ci=0.005, name="copy")
    return Row("tests/perf/test_copy.py::test_copy", m, decide(baseline=BaselineCheck(NO_BASELINE)))


# -- tables and texts ------------------------------------------------------------------------------


def test_a_memory_bound_row_is_what_it_was():
    row = memory_bound()
    cell = cells(row)
    assert (cell["TFLOP/s"], cell["roof"], cell["floor"]) == ("—", "—", "—")
    table = report.terminal_table([row], width=160)
    assert "TFLOP/s" not in table and "roof" not in table
    assert "TFLOP/s" not in report.failure_text(row.measurement, row.verdict)


def test_a_gemm_row_shows_tflops_and_the_roof_that_binds():
    row = gemm(0.75)
    cell = cells(row)
    assert cell["TFLOP/s"] == "980.5" and cell["roof"] == "75.0% bf16"  # 0.75 x 1307.4
    assert cell["floor"] == "60% flops"
    table = report.terminal_table([row, memory_bound()], width=200)
    assert "TFLOP/s" in table and "of roof" in table and "75.0% bf16" in table


def test_a_missed_compute_floor_leads_its_failure_text():
    row = gemm(0.5)
    assert row.verdict.failed_checks == ("min_flops",)
    text = report.failure_text(row.measurement, row.verdict)
    first = text.splitlines()[0]
    assert first.startswith(
        "gemm: compute efficiency 50.00% of the bf16 peak 1,307 TFLOP/s is below the floor 60.00%"
    ), first
    assert "expected >= 60.00% of the bf16 peak 1,307 TFLOP/s = 784.4 TFLOP/s (min_flops)" in text
    assert "intensity 2,731 FLOP/B, above the bf16 ridge 246.7 FLOP/B: compute-bound" in text
    assert "653.7 TFLOP/s = 50.00% of the bf16 peak" in text  # measured, beside GB/s
    assert report.summary_line([row]) == "1 measurement in 1 test: 1 failed (compute floor)"


def test_junit_and_pytest_benchmark_carry_the_numbers_where_work_was_declared():
    row = gemm(0.75)
    properties = dict(report.junit_properties(row.measurement, row.verdict))
    assert properties["gpuperf_math"] == "bf16" and properties["gpuperf_bound"] == "compute"
    assert float(properties["gpuperf_tflops"]) == pytest.approx(980.55, rel=1e-4)
    assert float(properties["gpuperf_flops_floor"]) == 0.6
    plain = dict(report.junit_properties(memory_bound().measurement, memory_bound().verdict))
    assert not any("flops" in key or "roof" in key for key in plain)
    document = report.to_pytest_benchmark_json([row, memory_bound()], ReportMeta())
    gemm_info, copy_info = (b["extra_info"] for b in document["benchmarks"])
    assert gemm_info["compute_efficiency"] == pytest.approx(0.75, rel=1e-6)
    assert gemm_info["roofline_efficiency"] == pytest.approx(0.75, rel=1e-6)
    assert "tflops" not in copy_info


def test_the_json_report_is_schema_4_and_reads_back_with_the_work(tmp_path):
    rows = [gemm(0.5), memory_bound()]
    document = report.to_json(rows, ReportMeta(commit="abc"))
    assert document["schema_version"] == 4
    first = document["results"][0]
    assert first["measurement"]["work"] == {
        "flops": GEMM,
        "math": "bf16",
        "peak_flops_per_s": WORK.peak_flops_per_s,
    }
    assert first["measurement"]["roofline"]["bound"] == "compute"
    assert first["verdict"]["flops_floor"]["status"] == "fail"
    assert document["results"][1]["measurement"]["work"] is None
    assert document["results"][1]["measurement"]["roofline"] is None
    path = json_report.write_json(tmp_path / "run.json", document)
    back = read_report(path)
    assert back.rows[0].measurement.work == WORK
    assert back.rows[0].verdict == rows[0].verdict


def test_a_version_3_report_still_reads(tmp_path):
    document = report.to_json([memory_bound()], ReportMeta(commit="abc"))
    document["schema_version"] = 3
    for result in document["results"]:  # what plugin versions of schema 3 wrote
        del result["measurement"]["work"], result["measurement"]["roofline"]
        del result["verdict"]["flops_floor"], result["verdict"]["roofline_floor"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(document))
    back = read_report(path)
    assert back.rows[0].measurement.work is None and back.rows[0].verdict.flops_floor is None


# -- the dashboard --------------------------------------------------------------------------------


def test_the_dashboard_plots_each_measurement_under_its_devices_roofs():
    key = ("mi300x", GEMM_ID, "gemm", "cold")
    points = published.roofline_points(key, gemm(0.75), 0) + published.roofline_points(
        key, gemm(0.5), 1
    )
    assert published.roofline_points(key, memory_bound(), 0) == []
    assert published.section([], {}) == ""
    html = published.section(points, {key: "m0"})
    assert "mi300x, bf16: compute roof 1,307.4 TFLOP/s, memory roof 5.30 TB/s" in html
    assert html.count('class="point"') == 1  # the newest run's point only
    assert "653.7 TFLOP/s at 2,730.7 FLOP/B, 50.0% of the bf16 compute roof (failed)" in html
    assert 'class="roof"' in html
    assert published.grid_cell(points[1]) == " · 653.7 TFLOP/s, 50.0% of the bf16 roof"


# -- the explain pass ----------------------------------------------------------------------------

NCU_HEADER = ["ID", "Kernel Name", *ncu.ALL_METRICS]


def ncu_csv(*launches: dict[str, float], missing: str = "") -> str:
    """A raw-page CSV as `ncu --csv --page raw --print-units base` writes one (`missing`: a
    metric this ncu reports as n/a)."""
    units = {m: "%" if "pct" in m else "" for m in ncu.ALL_METRICS}
    lines = [",".join(f'"{h}"' for h in NCU_HEADER)]
    lines.append(",".join(['""', '""', *(f'"{units[m]}"' for m in ncu.ALL_METRICS)]))
    for number, values in enumerate(launches):
        cells = ["n/a" if m == missing else f"{values.get(m, 0):,.0f}" for m in ncu.ALL_METRICS]
        lines.append(",".join(f'"{v}"' for v in [str(number), "gemm", *cells]))
    return "\n".join(lines)


def test_ncu_compute_counters_read_into_traffic():
    values = {
        ncu.TENSOR_PIPE_HMMA: 12,
        ncu.TENSOR_PIPE_GMMA: 81,
        ncu.TENSOR_PIPE_ANY: 85,  # every tensor instruction: the utilisation
        ncu.FMA_PIPE: 3,
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1000,
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 10,
        "sm__ops_path_tensor_src_bf16_dst_fp32.sum": 2 * 1024**3,
        ncu.DURATION: 1000,
    }
    (launch,) = ncu.read_ncu_csv(ncu_csv(values))
    traffic = ncu.traffic_of(launch)
    assert traffic.tensor_pipe == pytest.approx(0.85) and traffic.tensor_pipe_kind == "wgmma (GMMA)"
    (older,) = ncu.read_ncu_csv(ncu_csv({ncu.TENSOR_PIPE_HMMA: 40}, missing=ncu.TENSOR_PIPE_ANY))
    assert ncu.traffic_of(older).tensor_pipe == pytest.approx(0.4)  # no catch-all: the family
    assert traffic.fma_pipe == pytest.approx(0.03)
    assert traffic.tensor_flops == 2 * 1024**3
    assert traffic.flops == 2 * 1024**3 + 2 * 1000 + 10


def test_a_memory_bound_test_asks_ncu_for_what_it_asked_before(tmp_path):
    plain = ncu.ncu_command(ncu.NCU_FALLBACK, cache_control="all", log_file=tmp_path / "l")
    assert plain[plain.index("--metrics") + 1] == ",".join(ncu.METRICS)
    unknown = frozenset({ncu.TENSOR_PIPE_GMMA})
    compute = ncu.ncu_command(
        ncu.NCU_FALLBACK,
        cache_control="all",
        log_file=tmp_path / "l",
        compute=True,
        unknown=unknown,
    )
    asked = compute[compute.index("--metrics") + 1].split(",")
    assert ncu.TENSOR_PIPE_HMMA in asked and ncu.TENSOR_PIPE_GMMA not in asked


def test_a_metric_ncu_does_not_know_is_named_from_its_error():
    output = (
        "==PROF== Connected to process 7\n"
        f"==ERROR== Failed to find metric {ncu.TENSOR_PIPE_GMMA}\n"
        "E   an unrelated pytest line naming sm__pipe_fma_cycles_active\n"
    )
    asked = ncu.metrics_for(True)
    assert ncu.refused_metrics(output, asked) == (ncu.TENSOR_PIPE_GMMA,)


def test_head_against_base_names_the_pipe_that_fell_first():
    base = Traffic("gemm", 1e9, 1e8, tensor_pipe=0.78, tensor_pipe_kind="wgmma (GMMA)",
                   fma_pipe=0.02, flops=1.1e12, tensor_flops=1.1e12, time_s=1.5e-3)  # fmt: skip
    head = dataclasses.replace(
        base, tensor_pipe=0.02, fma_pipe=0.71, tensor_flops=0.0, time_s=20e-3
    )
    lines = traffic_lines(head, base, compute=True)
    assert lines[0] == "tensor pipe utilisation fell 78% -> 2% (wgmma (GMMA))"
    assert lines[1] == "FP32 FMA pipe utilisation rose 2% -> 71%"
    assert "tensor-path FLOPs 1.1 TFLOP -> 0 FLOP" in lines
    assert "counted FLOPs at the profiler's times: 733.3 -> 55.0 TFLOP/s" in lines
    assert "head moved the same DRAM bytes" in " ".join(lines)
    assert compute_lines(base, base) == [
        "counted FLOPs at the profiler's times: 733.3 -> 733.3 TFLOP/s"
    ]
    # a memory-bound test's lines are what they were
    assert traffic_lines(head, base) == traffic_lines(head, base, compute=False)
    assert not any("pipe" in line for line in traffic_lines(head, base))


def test_a_callables_launches_sum_their_flops_and_weigh_their_pipes_by_time():
    one = Traffic("a", tensor_pipe=0.8, flops=10.0, tensor_flops=10.0, time_s=3.0)
    two = Traffic("b", tensor_pipe=0.4, flops=5.0, tensor_flops=0.0, time_s=1.0)
    both = summed([one, two])
    assert both.flops == 15.0 and both.tensor_flops == 10.0
    assert both.tensor_pipe == pytest.approx(0.7)


@pytest.mark.parametrize(
    ("counted", "tensor", "math", "outcome", "words"),
    [
        (1.0e12, 1.0e12, "bf16", "within", "declared FLOPs match the counters: 1.00 TFLOP counted"),
        (2.0e12, 2.0e12, "bf16", "over", "declared FLOPs look too low"),
        (0.5e12, 0.5e12, "bf16", "under", "declared FLOPs look too high"),
        (0.1e9, None, "bf16", "not-checked", "no tensor-path counter for bf16 on this GPU"),
        (1.0e12, None, "fp32", "within", "declared FLOPs match the counters"),
        (None, None, "fp32", "not-checked", "no floating-point counter for this launch"),
        (1.0e12, 1.0e12, "int8", "not-checked", "not int8 ones"),
    ],
)
def test_the_declared_flops_are_checked_against_the_counted(counted, tensor, math, outcome, words):
    check = FlopsCheck(10**12, counted, math, tensor)
    assert check.outcome == outcome and words in check.line()
    assert check.warns == (outcome in ("over", "under"))
    assert check.plain()["line"] == check.line()


ROCPROF_COMPUTE = """\
"Correlation_Id","Dispatch_Id","Kernel_Name","VGPR_Count","SGPR_Count","Scratch_Size","Counter_Name","Counter_Value"
1,1,"gemm",64,32,0,"SQ_INSTS_VALU_MFMA_MOPS_BF16",1000.0
1,1,"gemm",64,32,0,"SQ_INSTS_VALU_FMA_F32",10.0
1,1,"gemm",64,32,0,"SQ_VALU_MFMA_BUSY_CYCLES",3648000.0
1,1,"gemm",64,32,0,"GRBM_GUI_ACTIVE",40000.0
"""


def test_rocprofv3_compute_counters_as_amds_documentation_defines_them():
    (dispatch,) = rocprof.read_rocprof_csv([ROCPROF_COMPUTE], compute_units=304, xcds=8)
    assert dispatch.tensor_flops == 512 * 1000  # MFMA ops "in the unit of 512"
    assert dispatch.flops == 512 * 1000 + 64 * 2 * 10  # 64 lanes, an FMA two FLOPs
    # busy cycles over (GRBM cycles per XCD x CUs x 4 SIMDs): 3,648,000 / (5,000 x 1,216)
    assert dispatch.tensor_pipe == pytest.approx(0.6) and dispatch.tensor_pipe_kind == "MFMA"


def test_rocprofv3_asks_for_the_compute_counters_in_passes_of_their_own(tmp_path):
    plain = rocprof.rocprof_command(rocprof.Path("rocprofv3"), output_dir=tmp_path / "a")
    assert plain[1:3] == ["--pmc", "FETCH_SIZE"]
    command = rocprof.rocprof_command(
        rocprof.Path("rocprofv3"), output_dir=tmp_path / "b", compute=True
    )
    passes = (tmp_path / "b" / "passes.txt").read_text().splitlines()
    assert command[1:3] == ["-i", str(tmp_path / "b" / "passes.txt")]
    assert passes[0] == "pmc: FETCH_SIZE WRITE_SIZE TCC_HIT_sum TCC_MISS_sum"
    assert all(len(line.split()) <= 5 for line in passes)


# -- the simulated device's compute roof ---------------------------------------------------------

# the kernel below has no model that computes its outputs: only its time matters here
NO_OUTPUTS = pytest.mark.filterwarnings("ignore::pytest_gpuperf.simulate.SimulationWarning")
KERNEL = """\
#include "gpuperf.h"
{directive}GPUPERF_KERNEL void mm(const float* a, float* c, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i];
}}
"""


def _kernel_time(sim, directive: str = "", work: tuple[int, str] | None = None) -> tuple:
    module = sim.compile(KERNEL.format(directive=directive), name="mm.hip")
    kernel = module.kernel("mm")
    a, c = sim.alloc(4 << 20), sim.alloc(4 << 20)
    if work is not None:
        sim.declare_work(kernel, *work)
    start, end = sim.create_event(), sim.create_event()
    sim.record_event(start)
    sim.launch(kernel, (4096,), (256,), (a, c, 1 << 20))
    sim.record_event(end)
    return sim.elapsed_s(start, end), sim.kernel_fingerprint(kernel), sim.speed_model(kernel)


@NO_OUTPUTS
def test_declared_flops_make_a_kernel_compute_bound_on_the_simulated_device():
    quiet = {"seed": 1, "run_spread": 0.0, "jitter": 0.0}
    memory, _, _ = _kernel_time(open_backend("sim", **quiet))
    flops = 10**12  # 1 TFLOP of bf16 at 70% of 1307.4 TFLOP/s: 1.09 ms
    computed, _, _ = _kernel_time(open_backend("sim", **quiet), work=(flops, "bf16"))
    assert memory < 20e-6
    assert computed == pytest.approx(2e-6 + flops / (1307.4e12 * 0.7), rel=0.02)


@NO_OUTPUTS
def test_the_compute_efficiency_directive_is_code_and_speed():
    quiet = {"seed": 1, "run_spread": 0.0, "jitter": 0.0}
    work = (10**12, "bf16")
    plain_s, plain_print, plain_model = _kernel_time(open_backend("sim", **quiet), work=work)
    slow_s, slow_print, slow_model = _kernel_time(
        open_backend("sim", **quiet), "// gpuperf-sim: compute_efficiency=0.35\n", work
    )
    assert slow_s == pytest.approx(2 * plain_s, rel=0.02)
    assert slow_print != plain_print and slow_model != plain_model  # timed, not "modelled"
    text = SourceText(KERNEL.format(directive=""), "mm.hip", None)
    assert code_object(text, {}) == code_object(text, {}, compute={})  # fingerprints kept


@NO_OUTPUTS
def test_a_models_flops_time_its_launches(tmp_path):
    source = tmp_path / "mm.hip"
    source.write_text(KERNEL.format(directive=""))
    quiet = {"seed": 1, "run_spread": 0.0, "jitter": 0.0}
    with kernel_models.scoped():
        kernel_models.register(
            source, "mm", flops=lambda args: 2 * 10**12, math="fp32", compute_efficiency=0.5
        )
        sim = open_backend("sim", **quiet)
        kernel = sim.compile(source).kernel("mm")
        a, c = sim.alloc(4 << 20), sim.alloc(4 << 20)
        start, end = sim.create_event(), sim.create_event()
        sim.record_event(start)
        sim.launch(kernel, (4096,), (256,), (a, c, 1 << 20))
        sim.record_event(end)
        assert sim.elapsed_s(start, end) == pytest.approx(2e-6 + 2e12 / (163.4e12 * 0.5), rel=0.02)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"flops": 7}, "flops must be a function of the arguments"),
        ({"flops": lambda a: 1}, "flops= and math= go together"),
        ({"flops": lambda a: 1, "math": "bf32"}, "unknown math type 'bf32'"),
        ({"compute_efficiency": 1.5}, "compute_efficiency=1.5 must be a fraction"),
    ],
)
def test_a_models_compute_part_is_checked(tmp_path, options, words):
    source = tmp_path / "mm.hip"
    source.write_text(KERNEL.format(directive=""))
    with kernel_models.scoped(), pytest.raises(kernel_models.ConfigError, match=words):
        kernel_models.register(source, "mm", **options)


def test_numpy_is_not_needed_to_import_the_simulators_models():
    assert not hasattr(kernel_models, "np") and np is not None
