"""The profilers' output read into Traffic: Nsight Compute's raw CSV as recorded on the H100
(tests/unit/data/ncu_raw_copy_h100.csv: the perf suite's STREAM copy of 8M floats profiled by
the explain pass's own command line, ncu 2025.3.1, 2026-11-27, bench/explain_on_gpu.sh), and
rocprofv3's counter CSV laid out as its documentation shows it ("Using rocprofv3",
ROCprofiler-SDK): no AMD GPU has produced the rocprofv3 text below.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf.explain.counters import ncu, rocprof
from pytest_gpuperf.explain.counters.ncu import ProfileCsvError, read_ncu_csv, refusal, traffic_of

DATA = Path(__file__).resolve().parent / "data"


def test_the_recorded_ncu_csv_reads_as_the_copy_launch_it_profiled():
    launches = read_ncu_csv((DATA / "ncu_raw_copy_h100.csv").read_text())
    assert len(launches) == 1  # the copy alone: the flush and the test's own launches are not
    traffic = traffic_of(launches[0])
    assert traffic.kernel == "copy"
    # 8M floats read (33,554,432 B) and 6 KB more; 17.4 MB of the 33.5 MB written reached
    # DRAM by the kernel's end, the rest still in the 50 MB L2
    assert traffic.dram_read_bytes == 33_559_808
    assert traffic.dram_write_bytes == 17_395_200
    assert traffic.l2_bytes == 104_078_400
    assert traffic.registers_per_thread == 16
    assert traffic.achieved_occupancy == pytest.approx(0.7274)
    assert traffic.instructions == 4_194_304
    assert traffic.local_bytes == 0
    assert traffic.time_s == pytest.approx(28.128e-6)  # "ns" in ncu 2025.3, not "nsecond"
    assert traffic.shared_bytes_per_block == 0  # static + dynamic, "byte/block"


def test_lines_before_the_header_and_between_rows_are_skipped():
    text = (DATA / "ncu_raw_copy_h100.csv").read_text()
    lines = text.splitlines()
    noisy = "\n".join([*lines[:5], "==PROF== Disconnected from process 1", *lines[5:]])
    assert [traffic_of(t).dram_read_bytes for t in read_ncu_csv(noisy)] == [33_559_808]


def test_a_report_without_its_header_is_an_error_not_zero_bytes():
    with pytest.raises(ProfileCsvError, match="no CSV header"):
        read_ncu_csv("==WARNING== No kernels were profiled.\n")


@pytest.mark.parametrize(
    ("output", "fix"),
    [
        (
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA "
            "GPU Performance Counters on the target device 0.",
            "NVreg_RestrictProfilingToAdminUsers=0",
        ),
        (
            "==ERROR== Profiling failed because a driver resource was unavailable. Ensure that "
            "no other tool (like DCGM) is concurrently collecting profiling data.",
            "dcgmi profile --pause",
        ),
        ("==PROF== Connected to process 4711", ""),
    ],
)
def test_a_refusal_names_its_fix(output, fix):
    line = refusal(output)
    assert (fix in line) if fix else line == ""


def test_the_command_asks_for_what_the_parser_reads(tmp_path):
    command = ncu.ncu_command(Path("/x/ncu"), cache_control="all", log_file=tmp_path / "l.csv")
    assert command[:6] == ["/x/ncu", "--csv", "--page", "raw", "--print-units", "base"]
    assert command[command.index("--metrics") + 1].split(",") == list(ncu.METRICS)
    assert command[command.index("--profile-from-start") + 1] == "off"
    assert command[command.index("--cache-control") + 1] == "all"
    assert command[command.index("--target-processes") + 1] == "application-only"


def test_gpuperf_ncu_names_the_profiler(monkeypatch, tmp_path):
    fake = tmp_path / "ncu"
    fake.write_text("")
    monkeypatch.setenv("GPUPERF_NCU", str(fake))
    assert ncu.find_ncu() == fake
    monkeypatch.setenv("GPUPERF_NCU", str(tmp_path / "absent"))
    assert ncu.find_ncu() is None  # named but absent: not silently another one


# Two passes of one dispatch each, as rocprofv3 writes them (pass_1/, pass_2/): the columns
# of its documentation's example, one row per counter per dispatch. FETCH_SIZE and WRITE_SIZE
# are kilobytes.
ROCPROF_PASS_1 = """\
"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name","Counter_Value","Start_Timestamp","End_Timestamp"
1,1,"Agent 1",1,4242,4242,1048576,3,"gpuperf_flush",256,0,0,8,0,16,"FETCH_SIZE",2097152.000000,100,200
1,1,"Agent 1",1,4242,4242,1048576,3,"gpuperf_flush",256,0,0,8,0,16,"WRITE_SIZE",0.000000,100,200
2,2,"Agent 1",1,4242,4242,33554432,5,"vector_add",256,0,16,12,4,32,"FETCH_SIZE",262144.000000,300,400
2,2,"Agent 1",1,4242,4242,33554432,5,"vector_add",256,0,16,12,4,32,"WRITE_SIZE",131072.000000,300,400
"""  # noqa: E501
ROCPROF_PASS_2 = """\
"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name","Counter_Value","Start_Timestamp","End_Timestamp"
2,2,"Agent 1",1,4242,4242,33554432,5,"vector_add",256,0,16,12,4,32,"TCC_HIT_sum",1000.000000,300,400
2,2,"Agent 1",1,4242,4242,33554432,5,"vector_add",256,0,16,12,4,32,"TCC_MISS_sum",3145728.000000,300,400
"""  # noqa: E501


def test_rocprofv3_counters_read_per_dispatch_across_passes():
    flush, kernel = rocprof.read_rocprof_csv([ROCPROF_PASS_1, ROCPROF_PASS_2])
    assert flush.kernel == "gpuperf_flush"
    assert kernel.kernel == "vector_add"
    assert kernel.dram_read_bytes == 262144 * 1024  # 256 MiB, kilobytes in FETCH_SIZE
    assert kernel.dram_write_bytes == 131072 * 1024
    assert (kernel.l2_hits, kernel.l2_misses) == (1000, 3145728)
    assert (kernel.registers_per_thread, kernel.scalar_registers) == (12, 32)
    assert kernel.scratch_per_thread_bytes == 16


def test_a_rocprofv3_row_that_does_not_read_is_an_error():
    broken = ROCPROF_PASS_1.replace("262144.000000", "many")
    with pytest.raises(ProfileCsvError, match="rocprofv3 counter row"):
        rocprof.read_rocprof_csv([broken])


def test_rocprofv3_files_are_found_in_either_layout(tmp_path):
    (tmp_path / "pass_1").mkdir()
    (tmp_path / "pass_1" / "gpuperf_counter_collection.csv").write_text(ROCPROF_PASS_1)
    (tmp_path / "gpuperf_counter_collection.csv").write_text(ROCPROF_PASS_2)
    assert len(rocprof.counter_files(tmp_path)) == 2
    command = rocprof.rocprof_command(Path("/opt/rocm/bin/rocprofv3"), output_dir=tmp_path)
    assert command[command.index("--pmc") + 1 : command.index("--output-format")] == list(
        rocprof.COUNTERS
    )
    assert command[-1] == "--"
